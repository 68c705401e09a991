"""Whisper's CPU threads: one call on all of them, or calls of one thread side by side.

    python -m bench.asr_lanes [--model whisper-base] [--steps 16] [--rounds 2]

A closed loop: the same steady-state steps (`bench.asr_batching.steady_steps`: an item's
first 4 or 8 s with its stable prefix forced, as sessions send them) are submitted at
once to the server's ASR worker, which batches them into calls on as many lanes as the
engine runs calls at once, and timed to the last result. Each configuration loads its own
engine; the rounds alternate, so drift hits every configuration alike, and the best round
counts. A second table times the same batches with the encoder's pass split as the CPU
engine does it (`_CPU_ENCODE_SECONDS` of windows a call) and as one call.

Progress goes to stderr, a markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path

from bench.asr_batching import run_closed_loop, steady_steps
from bench.audio import RATE, session_inputs, wer_clips
from bench.report import log, table
from dragoman.config import default_cache_dir
from dragoman.cpu import cpu_info
from dragoman.engines.asr.base import StepRequest
from dragoman.engines.asr.whisper_ct2 import WhisperCT2Engine
from dragoman.logs import configure as configure_logs
from dragoman.weights import resolve

#: (label, threads a call, calls at once)
CONFIGS = (
    ("one call on 2 threads (before)", 2, 1),
    ("one call on 1 thread", 1, 1),
    ("2 calls of 1 thread (the CPU default)", 1, 2),
)


def _batches(engine: WhisperCT2Engine, requests: list[StepRequest], split: bool) -> float:
    engine.split_encode = split
    try:
        began = time.perf_counter()
        for i in range(0, len(requests), 8):
            engine.transcribe_batch(requests[i : i + 8])
        return time.perf_counter() - began
    finally:
        engine.split_encode = True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.asr_lanes", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--steps", type=int, default=16, help="steps per closed loop")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-batch", type=int, default=16)
    args = parser.parse_args(argv)
    configure_logs("warning", "console")
    caps = [f"{k}={v}" for k in ("CT2_FORCE_CPU_ISA", "ONEDNN_MAX_CPU_ISA") if (v := os.environ.get(k))]
    print("# Whisper's CPU threads: one call, or calls side by side\n")
    print(
        f"Model {args.model}, int8; {cpu_info().describe()}{' ' + ' '.join(caps) if caps else ''}; "
        f"load average at start {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}.\n"
    )
    path = resolve(args.model, Path(os.environ.get("DRAGOMAN_CACHE_DIR") or default_cache_dir()), role="asr")
    engines = {label: WhisperCT2Engine(path, threads=t, parallel_calls=c) for label, t, c in CONFIGS}
    reference = engines[CONFIGS[-1][0]]
    inputs = session_inputs(wer_clips(30.0), args.steps, 20.0)
    rows = []
    split_rows = []
    for seconds in (4.0, 8.0):
        requests = steady_steps(reference, inputs, seconds)
        audio = sum(len(r.audio) for r in requests) / RATE
        best = {label: float("inf") for label in engines}
        for _ in range(args.rounds):
            for label, engine in engines.items():
                best[label] = min(
                    best[label], asyncio.run(run_closed_loop(engine, requests, args.max_batch)).wall
                )
        log(f"{seconds:g} s steps: " + ", ".join(f"{k}: {v:.2f} s" for k, v in best.items()))
        base = best[CONFIGS[0][0]]
        for label, wall in best.items():
            rows.append(
                [
                    f"{seconds:g} s",
                    label,
                    f"{wall:.2f}",
                    f"{len(requests) / wall:.1f}",
                    f"{audio / wall:.0f}",
                    f"{base / wall:.2f}×",
                ]
            )
        walls = {True: float("inf"), False: float("inf")}
        for _ in range(args.rounds):
            for split in (False, True):
                walls[split] = min(walls[split], _batches(reference, requests, split))
        split_rows.append(
            [
                f"{seconds:g} s",
                f"{walls[False]:.2f}",
                f"{walls[True]:.2f}",
                f"{walls[False] / walls[True]:.2f}×",
            ]
        )
    print(
        f"{args.steps} steady steps at once through the ASR worker (max batch {args.max_batch}), "
        f"best of {args.rounds}:\n"
    )
    print(table(["steps of", "engine calls", "wall s", "steps/s", "audio s/s", "speed-up"], rows))
    print(
        "\nThe same steps in calls of 8 on one thread, the encoder's pass whole or split "
        f"(best of {args.rounds}):\n"
    )
    print(table(["steps of", "one encoder call s", "split s", "speed-up"], split_rows))
    for engine in engines.values():
        engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
