"""What a thread running Python beside it costs an MT draft.

    python -m bench.mt_contention [--direction en-de] [--sentences 6] [--threads 1]

In the server an MT draft never runs alone: the event loop and the ASR and TTS workers
run Python on the other core. A draft needs the GIL wherever it calls back into Python
(each forward pass, and the attention tap's eval callback, which llama.cpp calls for
the graph's nodes), and CPython hands the GIL from a thread that holds it only every
switch interval (5 ms). This benchmark times the same partial drafts (the first words
of FLORES sentences, 12 new tokens, the calibrated heads tapped, as the interpreter
drafts) on `--threads` threads, alone and beside a thread that runs a pure-Python loop,
at the default switch interval and a short one, and prints each next to the drafts
alone in the same run. Before the tap's questions were answered in C, the busy thread
made these drafts 1.8x as slow, and one longer draft 3.5x
(bench/history/2026-12-07_native_node_filter.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext

from bench.mt_data import load
from bench.report import header, log, table
from dragoman.config import load_settings
from dragoman.engines.mt.base import DraftMode, MTEngine, MTRequest
from dragoman.engines.registry import create_mt_engine
from dragoman.logs import configure as configure_logs


def _spin(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i


@contextmanager
def busy_python(switch_interval: float | None) -> Iterator[None]:
    """A thread running a pure-Python loop meanwhile, at `switch_interval` (None: unchanged)."""
    default = sys.getswitchinterval()
    stop = threading.Event()
    thread = threading.Thread(target=_spin, args=(stop,), daemon=True)
    if switch_interval is not None:
        sys.setswitchinterval(switch_interval)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(default)


def draft_ms(engine: MTEngine, requests: Sequence[MTRequest]) -> list[float]:
    """Each request drafted from an empty cache, in milliseconds."""
    times = []
    for request in requests:
        start = time.perf_counter()
        engine.draft(request)
        times.append((time.perf_counter() - start) * 1000)
        if request.cache_key is not None:
            engine.forget(request.cache_key)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mt_contention", description=__doc__.split("\n")[0])
    parser.add_argument("--direction", default="en-de")
    parser.add_argument("--sentences", type=int, default=6)
    parser.add_argument("--words", type=int, default=8, help="source words of each partial draft")
    parser.add_argument(
        "--threads", type=int, default=1, help="the MT's threads (the busy thread takes another)"
    )
    parser.add_argument("--preset", default="low_latency")
    args = parser.parse_args(argv)
    configure_logs("warning", "console")
    source, target = args.direction.split("-")
    settings = load_settings(
        **{
            "mt.backend": "qwen-llama",
            "mt.preset": args.preset,
            "mt.threads": args.threads,
            "mt.idle_threads": args.threads,
            "mt.lanes": 1,
        }
    )
    log("loading the MT engine")
    engine = create_mt_engine(settings.mt, settings.cache_dir)
    engine.warm_up()
    requests = [
        MTRequest(
            source,
            target,
            tuple(w.text for w in sentence.words[: args.words]),
            mode=DraftMode.PARTIAL,
            max_new_tokens=12,
            cache_key=f"contention-{index}",
        )
        for index, sentence in enumerate(load("flores", args.direction, args.sentences))
    ]
    # (condition, a busy thread beside, its switch interval: None unchanged)
    conditions: list[tuple[str, bool, float | None]] = [
        ("alone", False, None),
        ("beside a Python-busy thread", True, None),
        ("beside it, switch interval 0.5 ms", True, 0.0005),
        ("alone again", False, None),
    ]
    medians: dict[str, float] = {}
    try:
        draft_ms(engine, requests[:1])  # the prompt's head and the kernels warm
        for name, busy, interval in conditions:
            log(name)
            with busy_python(interval) if busy else nullcontext():
                medians[name] = statistics.median(draft_ms(engine, requests))
    finally:
        engine.close()
    header(
        "An MT draft beside a thread running Python",
        f"{engine.name}, {args.direction}, {len(requests)} FLORES partial drafts ({args.words} words, "
        f"12 new tokens) on {args.threads} MT thread(s), median of each condition; ",
    )
    alone = statistics.fmean([medians["alone"], medians["alone again"]])
    rows = [(name, ms, ms / alone) for name, ms in medians.items()]
    print(table(["condition", "draft ms (median)", "x alone"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
