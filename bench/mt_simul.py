"""Simultaneous MT benchmark: quality next to offline, and LAAL, of the real session + engine.

    python -m bench.mt_simul --direction en-de --sentences 30 [--preset low_latency]

Each sentence is streamed through a fresh sans-I/O `MTSession` (no sockets: the
transport adds nothing to measure here) driving the real engine in-process, under a
simulated clock in which the source words arrive at their times and engine work
takes the time it measured:

- The client behaves like WhisperLiveKit's `translation_alignatt.py`: every update
  carries all committed words (with timestamps) plus the unstable tail; partial
  updates are sent only after the previous answer came back, at least 0.5 s apart
  and at least 1.2x the last call's duration apart (its `_MIN_PARTIAL_INTERVAL_SECONDS`
  and `_PACING`), with everything that arrived meanwhile coalesced into one update;
  at the end of the source an `is_final` update closes the utterance.
- The ASR is modelled as exact with a hold-back: of the words heard so far, the last
  `--tail-words` are the unstable tail and the rest are committed, until a pause of
  `--pause-commit-ms` commits the tail too (the case the commit fast path serves);
  the final update commits them all.
- Ideal delays are the audio position (`clock_ms`) of the update whose answer first
  held a target unit; computation-aware delays are the simulated time the answer
  arrived, so waiting for a busy engine counts. See `bench.mt_metrics`.

The offline baseline is one FINAL engine call on the whole sentence, as the session's
end-of-utterance pass makes it, without the streamed prefix.

With `--document`, the lines of a direction are one talk instead: they stream through
one session, one utterance each, `--line-gap-ms` apart, as the reference client sends
consecutive utterances. The session's clock runs on across lines, an engine still busy
with a line's final delays the next line's first update, and the preset's
`history_pairs` puts the previous lines (source and committed translation) in the
prompt. The offline baseline then gets as many of its own previous pairs. BLEU is also
scored at document level, all lines joined into one segment, as the issue scores it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.mt_data import DATASETS, DEFAULT_WORDS_PER_SECOND, load
from bench.mt_metrics import sentence_laal
from bench.mt_simul_summary import markdown, record_goal, summarize
from bench.mt_simulation import (
    DEFAULT_LINE_GAP_MS,
    DEFAULT_PAUSE_COMMIT_MS,
    SentenceRun,
    run_document,
    simulate,
)
from dragoman.cpu import cpu_info
from dragoman.engines.mt.base import MTEngine
from dragoman.logs import configure as configure_logs
from dragoman.streaming.alignatt_presets import policy_presets


def print_line(index: int, run: SentenceRun, *, target: str, count: int, verbose: bool) -> None:
    """Progress on stderr: a line's translations and latency (and its trace if `verbose`)."""
    sentence = run.sentence
    lat = sentence_laal(run.emissions, run.simul_text, sentence.reference, target, sentence.duration_ms)
    print(
        f"[{target} {index}/{count}] {sentence.id}: {run.engine_calls} calls, "
        f"{run.copy_redrafts} copy redrafts, {run.loop_cuts} loop cuts, "
        f"LAAL {lat.ideal_ms if lat else float('nan'):.0f}/"
        f"{lat.computation_aware_ms if lat else float('nan'):.0f} ms\n"
        f"    simul:   {run.simul_text}\n    offline: {run.offline_text}",
        file=sys.stderr,
        flush=True,
    )
    if verbose:
        print("\n".join("      " + line for line in run.trace), file=sys.stderr, flush=True)


def parse_overrides(items: Sequence[str]) -> dict[str, object]:
    """`KEY=VALUE` strings as init overrides; VALUE is read as JSON, else kept as text."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--override wants KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _compute(engine: MTEngine) -> str:
    info = engine.describe()
    return f"{info.compute_type} ({info.compute_reason})" if info.compute_reason else info.compute_type


def _engine(args: argparse.Namespace) -> tuple[MTEngine, str]:
    from dragoman.config import load_settings
    from dragoman.engines.registry import create_mt_engine

    overrides: dict[str, Any] = {
        "mt.backend": args.backend,
        "mt.preset": args.preset,
        "mt.compute_type": args.compute_type,
    }
    if args.model:
        overrides["mt.model"] = args.model
    if args.threads:
        overrides["mt.threads"] = args.threads
    if args.stale_budget is not None:
        overrides["mt.stale_budget"] = args.stale_budget
    settings = load_settings(**overrides)
    engine = create_mt_engine(settings.mt, settings.cache_dir)
    engine.warm_up()  # as the server does before it is ready
    return engine, settings.mt.preset


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mt_simul", description=__doc__.split("\n")[0])
    parser.add_argument("--direction", default="en-de", help="en-de, en-it, en-zh, or a comma list")
    parser.add_argument("--sentences", type=int, default=30)
    parser.add_argument("--data", choices=DATASETS, default="flores")
    parser.add_argument("--preset", default=None, help="session preset (default: the configured one)")
    parser.add_argument("--backend", default=None, help="MT backend (default: the configured one)")
    parser.add_argument("--model", default=None, help="model folder for backends that take one")
    parser.add_argument(
        "--compute-type", default=None, help="auto, int8, bfloat16 or float32 (default: the configured one)"
    )
    parser.add_argument("--tail-words", type=int, default=2, help="words the ASR holds back as its tail")
    parser.add_argument(
        "--pause-commit-ms", type=float, default=DEFAULT_PAUSE_COMMIT_MS, help="silence that commits the tail"
    )
    parser.add_argument("--words-per-second", type=float, default=DEFAULT_WORDS_PER_SECOND)
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client override sent in init, e.g. translation_alignatt_stop_at_frontier=true (repeatable)",
    )
    parser.add_argument("--threads", type=int, default=0, help="MT engine threads (default: the configured)")
    parser.add_argument(
        "--stale-budget",
        type=int,
        default=None,
        help="qwen-llama: source tokens inserted under kept cells before they are recomputed "
        "(default: the configured; 0: exact)",
    )
    parser.add_argument(
        "--no-copy-check",
        action="store_true",
        help="never redraft a draft that copies the source (to measure what the check does)",
    )
    parser.add_argument(
        "--document",
        action="store_true",
        help="stream a direction's lines as one talk through one session, with the preset's history",
    )
    parser.add_argument(
        "--line-gap-ms",
        type=float,
        default=DEFAULT_LINE_GAP_MS,
        help="--document: the speaker's pause between lines",
    )
    parser.add_argument(
        "--stream-commits",
        action="store_true",
        help="commits go out pass by pass, as the interpreter's MT sessions send them "
        "(MT protocol v1 clients get one answer an update)",
    )
    parser.add_argument("--verbose", action="store_true", help="print every update of every sentence")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args(argv)
    configure_logs("info", "console")  # the engine's log lines go to stderr, not the table
    if args.no_copy_check:
        from dragoman.sessions.mt import utterance

        utterance.COPY_CHECK_WORDS = 0  # no utterance is ever short enough to be checked

    load_before = os.getloadavg()[0]
    load_started = time.perf_counter()
    engine, preset = _engine(args)
    print(f"engine {engine.name} loaded in {time.perf_counter() - load_started:.1f} s", file=sys.stderr)
    presets = policy_presets(engine.name, preset)
    client_overrides = parse_overrides(args.override)
    if preset not in presets:
        parser.error(f"unknown preset {preset!r}; known: {', '.join(sorted(presets))}")
    summaries = []
    try:
        for direction in [d.strip() for d in args.direction.split(",") if d.strip()]:
            sentences = load(args.data, direction, args.sentences, words_per_second=args.words_per_second)
            report = functools.partial(
                print_line, target=direction.split("-")[1], count=len(sentences), verbose=args.verbose
            )
            options: dict[str, Any] = {
                "tail_words": args.tail_words,
                "pause_commit_ms": args.pause_commit_ms,
                "overrides": client_overrides,
                "presets": presets,
                "stream_commits": args.stream_commits,
            }
            if args.document:
                runs = run_document(
                    sentences,
                    engine,
                    direction=direction,
                    preset=preset,
                    line_gap_ms=args.line_gap_ms,
                    on_line=report,
                    **options,
                )
            else:
                runs = []
                for index, sentence in enumerate(sentences, 1):
                    runs.append(simulate(sentence, engine, direction=direction, preset=preset, **options))
                    report(index, runs[-1])
            summaries.append(summarize(direction, args.data, runs))
    finally:
        engine.close()
    header = (
        f"Simultaneous MT, engine {engine.name}, preset {preset}, ASR tail {args.tail_words} words "
        f"(committed after {args.pause_commit_ms:.0f} ms of silence); "
        f"constant rate {args.words_per_second} words/s where the data has no timings.\n"
        f"Policy: {presets[preset]}; client overrides: {client_overrides or 'none'}; "
        f"copy check {'off' if args.no_copy_check else 'on'}; "
        f"commits {'streamed pass by pass' if args.stream_commits else 'one answer an update'}; "
        + (
            f"each direction one talk through one session, lines {args.line_gap_ms:.0f} ms apart\n"
            if args.document
            else "each line a fresh session\n"
        )
        + f"Engine compute: {_compute(engine)}. CPU: {cpu_info().describe()}.\n"
        f"Timing is wall clock on this machine; 1-minute load average "
        f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (above the CPU count, "
        "other processes inflated the engine times and the computation-aware LAAL)."
    )
    table = markdown(summaries, header)
    print(table)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")
    for summary in summaries:
        record_goal(summary, engine.name, preset, args.document, streamed=args.stream_commits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
