"""Compute paths on this CPU: what each compute type costs the engines, side by side.

    .venv/bin/python -m bench.compute_paths
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2 .venv/bin/python -m bench.compute_paths

A kernel that is fast on one CPU can crawl on another (int8 `_int_mm` was 8x slower
than fp32 on an AVX2-only AMD EPYC), so `auto` must pick per CPU. This measures, in one
run: the MT engine's linear layers (the Int8Linear of `engines/torch_lm/int8` against
fp32 and bf16 `nn.Linear`, at the 0.5B model's widest shape, one decoded token and an
8-token prefill), and the Whisper engine's re-decode step on real speech at each
CTranslate2 compute type. It prints what `auto` chooses here.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from bench.audio import Audio, eval_rows, load
from dragoman.cpu import cpu_info

REPEATS = 15


def _median_ms(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def mt_layers(threads: int) -> list[str]:
    import torch

    from dragoman.engines.torch_lm.int8 import Int8Linear
    from dragoman.engines.torch_lm.load import choose_compute_type

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lines = [
        f"### MT linear layer, 896 x 4864 (Qwen2.5-0.5B's MLP), {threads} thread(s), median of {REPEATS}\n",
        "| rows | int8 (Int8Linear) ms | float32 ms | bfloat16 ms | int8 / float32 |",
        "|---:|---:|---:|---:|---:|",
    ]
    with torch.inference_mode():
        linear = torch.nn.Linear(896, 4864, bias=False)
        int8 = Int8Linear(linear)
        bf16 = torch.nn.Linear(896, 4864, bias=False).to(torch.bfloat16)
        for rows in (1, 8, 32):
            x = torch.randn(rows, 896)
            xb = x.to(torch.bfloat16)
            t_int8 = _median_ms(functools.partial(int8, x))
            t_fp32 = _median_ms(functools.partial(linear, x))
            t_bf16 = _median_ms(functools.partial(bf16, xb))
            lines.append(f"| {rows} | {t_int8:.2f} | {t_fp32:.2f} | {t_bf16:.2f} | {t_int8 / t_fp32:.2f} |")
    choice = choose_compute_type("auto")
    lines.append(f"\n`auto` chooses **{choice.compute_type}** here: {choice.reason}.\n")
    return lines


def asr_steps(threads: int) -> list[str]:
    import ctranslate2

    rows = [r for r in eval_rows("en") if not r.weak and 8.0 <= r.duration <= 14.0][:4]
    audio = [load(row) for row in rows]
    supported = ctranslate2.get_supported_compute_types("cpu")
    lines = [
        f"### Whisper base re-decode step, {len(rows)} real English clips of 8-14 s, {threads} thread(s)\n",
        f"CTranslate2 {ctranslate2.__version__}, compute types supported here: {', '.join(sorted(supported))}.\n",
        "| compute type | ms per step (median) | ms per step, batch of 4 | relative to int8 |",
        "|---|---:|---:|---:|",
    ]
    base: float | None = None
    for compute_type in ("int8", "int8_float32", "float32"):
        if compute_type not in supported:
            continue
        single, batch = _asr_step_ms(compute_type, audio, threads)
        base = base or single
        lines.append(f"| {compute_type} | {single:.0f} | {batch:.0f} | {single / base:.2f} |")
        print(f"  asr {compute_type}: {single:.0f} ms", file=sys.stderr, flush=True)
    return lines


def _asr_step_ms(compute_type: str, audio: list[Audio], threads: int) -> tuple[float, float]:
    """(median ms of one clip's step, ms of all clips in one batched call) at `compute_type`."""
    from dragoman.config import ASRSettings, default_cache_dir
    from dragoman.engines.asr.base import StepRequest
    from dragoman.engines.registry import create_asr_engine

    settings = ASRSettings(model="whisper-base", compute_type=compute_type, threads=threads)
    engine = create_asr_engine(settings, default_cache_dir())
    try:
        requests = [StepRequest(a, language="en") for a in audio]
        single = statistics.median(
            _median_ms(functools.partial(engine.transcribe_batch, [r]), repeats=3) for r in requests
        )
        return single, _median_ms(lambda: engine.transcribe_batch(requests), repeats=3)
    finally:
        engine.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compute_paths", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads per engine call (default 1)")
    args = parser.parse_args(argv)
    print(
        f"# Compute paths on this CPU\n\nCPU: {cpu_info().describe()}; {time.strftime('%Y-%m-%d %H:%M')}.\n"
    )
    print("\n".join(mt_layers(args.threads)))
    print("\n".join(asr_steps(args.threads)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
