"""Server memory with MT and the agent on the same 1.5B: `python -m bench.agent_shared_weights`.

    --src /path/to/other/checkout/src   run the servers from another checkout (e.g. one from
                                         before the weights were shared) instead of this one

Real `dragoman serve` processes on free loopback ports, one after the other:
1. `--services agent --llm-model qwen2.5-1.5b-instruct-gguf` (Whisper, Silero, Smart Turn,
   the TTS voices and the 1.5B);
2. the same with MT as well, `--services mt,agent --preset low_latency`: the MT engine on the
   same 1.5B GGUF.
The server's resident set (VmRSS) and its peak (VmHWM) are read from /proc once /health
answers 200 and the server has idled 3 s. What MT adds over the agent alone is its context,
when the model is shared, or the model's weights again, when it is not. Whether the server
shared the model shows in its log (`llama.cpp model shared`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import server as dragoman_server
from bench.agent_memory import read_status
from bench.report import header, log, table

QUALITY = "qwen2.5-1.5b-instruct-gguf"
SETUPS: tuple[tuple[str, list[str]], ...] = (
    ("agent (1.5B)", ["--services", "agent", "--llm-model", QUALITY]),
    (
        "MT and agent (both 1.5B)",
        ["--services", "mt", "agent", "--llm-model", QUALITY, "--preset", "low_latency"],
    ),
)


def measure(args: list[str], log_path: Path) -> tuple[float, float, bool]:
    """(VmRSS MiB, VmHWM MiB, whether the log says the model was shared) of an idle server."""
    with dragoman_server.running(["serve", *args], log_path) as server:
        time.sleep(3.0)
        status = read_status(server.process.pid)
        shared = "llama.cpp model shared" in log_path.read_text(errors="replace")
    return status["VmRSS"] / 2**20, status["VmHWM"] / 2**20, shared


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent_shared_weights", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--src", type=Path, help="a checkout's src/ to run the servers from")
    args = parser.parse_args(argv)
    if args.src is not None:
        os.environ["PYTHONPATH"] = f"{args.src.resolve()}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="shared-weights-") as tmp:
        for label, setup in SETUPS:
            log(f"starting: {label}")
            rss, peak, shared = measure(setup, Path(tmp) / f"{len(rows)}.log")
            rows.append([label, f"{rss:.0f}", f"{peak:.0f}", "yes" if shared else "no"])
    header("Server memory with MT and the agent on one 1.5B")
    print(f"Servers run from {args.src or 'this checkout'}.\n")
    print(table(["server", "VmRSS MiB", "VmHWM MiB", "model shared"], rows, whole=True))
    added = float(rows[1][1]) - float(rows[0][1])
    print(f"\nMT adds {added:.0f} MiB of resident memory to the agent alone.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
