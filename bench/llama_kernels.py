"""llama.cpp's CPU kernel variants on this CPU: `python -m bench.llama_kernels`.

    --model qwen2.5-1.5b-instruct-gguf   a packaged model name (default: the MT 1.5B)
    --variants haswell,zen4              variants to time (default: every one from AVX2 up
                                         that this CPU runs, less the AMX one, which faults here)
    --threads 2

Each variant runs in a fresh interpreter, since a process loads its kernels once
(`engines.llama_backend`). It times, best of 3 in the same process: a prefill of 16
and of 64 tokens after a 100-token prompt (what one MT update or a voice-agent
turn computes), and 16 one-token decode steps. The table gives tok/s and the ratio
to the AVX2 (`haswell`) kernels measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from dragoman.config import load_settings
from dragoman.cpu import cpu_info
from dragoman.engines.llama_backend import (
    VARIANT_FLAGS,
    VARIANT_VARIABLE,
    library_dir,
    variants_in,
)
from dragoman.weights import gguf_file, resolve

TEXT = "The committee met on Tuesday to discuss the new railway line and its costs. " * 12
REPEATS = 3


def child(model: str, threads: int) -> dict[str, float | str]:
    """The timings of one variant, in this process."""
    from dragoman.engines.llm.llama_runtime import LlamaRuntime

    gguf = gguf_file(resolve(model, load_settings().cache_dir))
    rt = LlamaRuntime(gguf, context_tokens=1024, threads=threads)
    tokens = rt.tokenize_plain(TEXT)
    out: dict[str, float | str] = {"variant": rt.backend.variant}
    for n in (16, 64):
        best = float("inf")
        for _ in range(REPEATS):
            rt.truncate(0)
            rt.decode(tokens[:100], 0)
            started = time.perf_counter()
            rt.decode(tokens[100 : 100 + n], 100)
            best = min(best, time.perf_counter() - started)
        out[f"prefill_{n}"] = n / best
    best = float("inf")
    for _ in range(REPEATS):
        rt.truncate(0)
        rt.decode(tokens[:100], 0)
        started = time.perf_counter()
        for k in range(16):
            rt.decode([tokens[100 + k]], 100 + k)
        best = min(best, time.perf_counter() - started)
    out["decode"] = 16 / best
    rt.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-1.5b-instruct-gguf")
    parser.add_argument("--variants", default="", help="comma-separated (default: all this CPU runs)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.model, args.threads)))
        return
    flags = cpu_info().flags
    held = variants_in(library_dir())
    if args.variants:
        wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    else:
        # From AVX2 up: the older levels are there for old CPUs, not to be chosen here.
        avx2 = VARIANT_FLAGS["haswell"]
        wanted = [v for v in held if v in VARIANT_FLAGS and avx2 <= VARIANT_FLAGS[v] <= flags]
        wanted.sort(key=lambda v: len(VARIANT_FLAGS[v]))
    rows = []
    for variant in wanted:
        print(f"timing {variant} ...", file=sys.stderr, flush=True)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.llama_kernels",
                "--child",
                "--model",
                args.model,
                "--threads",
                str(args.threads),
            ],
            env=dict(os.environ) | {VARIANT_VARIABLE: variant},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            rows.append(
                {"variant": variant, "error": f"exit {done.returncode}: {done.stderr.strip()[-200:]}"}
            )
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = next((r for r in rows if r.get("variant") == "haswell" and "error" not in r), None)
    print(f"Model {args.model}, {args.threads} threads. CPU: {cpu_info().describe()}.\n")
    print("| variant | prefill 16 tok/s | prefill 64 tok/s | decode tok/s | prefill 64 vs haswell |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['variant']} | {r['error']} | | | |")
            continue
        ratio = f"{float(r['prefill_64']) / float(base['prefill_64']):.2f}" if base else "–"
        print(
            f"| {r['variant']} | {float(r['prefill_16']):.1f} | {float(r['prefill_64']):.1f} | "
            f"{float(r['decode']):.1f} | {ratio} |"
        )


if __name__ == "__main__":
    main()
