"""Streaming-transcription benchmarks with the real model: `python -m bench.asr_streaming`.

    --only wer,revisions,steps,concurrency,batching   (default: all)
    --quick                                          a smoke run of a few minutes
    --model whisper-base                             a packaged model name or a CTranslate2 folder
    --max-window 10                                  the re-decode window compared with none (0)
    --wer-range 10,60                                only the recordings of 10-60 s in the WER set

Progress goes to stderr, markdown tables to stdout. Absolute times on a shared
2-core machine are noisy, so each benchmark compares figures measured in the same
run. Audio and references come from ../shared/eval (never copied into the repo).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import asr_inprocess as inproc
from bench.asr_batching import ClosedLoop, closed_loop, steady_steps
from bench.asr_load import LoadResult
from bench.asr_streaming_inprocess import (
    WerRun,
    report_first_partial,
    report_revisions,
    report_wer,
    run_steps,
    run_wer,
)
from bench.asr_streaming_plan import Plan
from bench.asr_streaming_server import (
    report_batching,
    report_closed_loop,
    report_concurrency,
    run_server_loads,
)
from bench.audio import session_inputs, wer_clips
from bench.report import header, log
from dragoman.logs import configure as configure_logs

SECTIONS = ("wer", "revisions", "steps", "concurrency", "batching")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.asr_streaming", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated, of {','.join(SECTIONS)}"
    )
    parser.add_argument("--model", default="whisper-base", help="packaged model name or a CTranslate2 folder")
    parser.add_argument(
        "--max-window", type=float, default=10.0, help="re-decode window in seconds, compared with none (0)"
    )
    parser.add_argument("--wer-range", help="MIN,MAX: only the recordings of MIN-MAX s in the WER set")
    parser.add_argument("--backend", help="ASR backend (default: the configured one), e.g. moonshine")
    parser.add_argument("--sessions", help="comma-separated session counts (default 1,2,4,8,16,24)")
    parser.add_argument(
        "--parallel-calls", type=int, help="the server's --asr-parallel-calls (default: its own choice)"
    )
    parser.add_argument(
        "--turn",
        choices=["server_vad"],
        help="concurrency: continuous speech with the server cutting items (default: the client commits)",
    )
    parser.add_argument(
        "--session-seconds", type=float, help="concurrency: speech per session (20; server_vad 60)"
    )
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if unknown := only - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    plan = Plan.make(args.quick, args.model, args.max_window)
    if args.wer_range:
        low, high = (float(v) for v in args.wer_range.split(","))
        plan = dataclasses.replace(plan, wer_range=(low, high))
    if args.backend:
        plan = dataclasses.replace(plan, backend=args.backend)
    if args.sessions:
        plan = dataclasses.replace(plan, sessions=tuple(int(n) for n in args.sessions.split(",")))
    if args.parallel_calls:
        plan = dataclasses.replace(plan, parallel_calls=args.parallel_calls)
    if args.turn:
        plan = dataclasses.replace(plan, turn_detection=args.turn, session_seconds=60.0)
    if args.session_seconds:
        plan = dataclasses.replace(plan, session_seconds=args.session_seconds)
    configure_logs("warning", "console")  # the engine's log lines go to stderr, not the tables
    began = time.perf_counter()
    header(
        f"Streaming transcription benchmark ({'quick' if plan.quick else 'full'})",
        f"Model {plan.model}, int8 on CPU; ",
    )
    settings = inproc.settings_for(plan.model, plan.backend)
    engine = inproc.load_engine(settings)
    profile = inproc.profile_of(engine, settings)
    cap = min(profile.max_item_seconds, profile.capabilities.max_audio_seconds)
    log(f"engine {engine.name} loaded; item cap {cap:g} s")
    all_clips = wer_clips(cap)
    wer_run: WerRun | None = None
    loops: tuple[ClosedLoop, ClosedLoop] | None = None
    try:
        if only & {"wer", "revisions"}:
            wer_run = run_wer(engine, plan, profile, cap)
            if "wer" in only:
                report_wer(wer_run, cap, plan)
                report_first_partial(wer_run)
        if "steps" in only:
            run_steps(engine, profile, plan, all_clips)
        if "batching" in only:
            inputs = session_inputs(all_clips, plan.batching_sessions, plan.session_seconds)
            requests = steady_steps(engine, inputs, min(plan.session_seconds, 10.0))
            loops = closed_loop(engine, requests, settings.asr.max_batch)
            log(f"closed loop: batched {loops[0].wall:.1f} s, serialized {loops[1].wall:.1f} s")
    finally:
        engine.close()
    loads: list[LoadResult] = []
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-") as tmp:
        workdir = Path(tmp)
        counts = list(plan.sessions) if "concurrency" in only else []
        if "batching" in only and plan.batching_sessions not in counts:
            counts.append(plan.batching_sessions)
        if counts:
            loads = run_server_loads(plan, all_clips, counts, None, workdir)
            if "concurrency" in only:
                report_concurrency([r for r in loads if r.sessions in plan.sessions], plan.turn_detection)
        if "batching" in only:
            serial = run_server_loads(plan, all_clips, [plan.batching_sessions], 1, workdir)
            batched = next(r for r in loads if r.sessions == plan.batching_sessions)
            report_batching(batched, serial[0])
            if loops is not None:
                report_closed_loop(*loops)
            loads += serial
    if "revisions" in only and wer_run is not None:
        report_revisions(wer_run, loads)
    load = os.getloadavg()
    print(f"Finished in {time.perf_counter() - began:.0f} s; load average at the end {load[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
