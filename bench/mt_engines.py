"""Simultaneous MT on two engines side by side: qwen-torch against qwen-llama, per model.

    python -m bench.mt_engines --model qwen2.5-0.5b-instruct-gguf --sentences 30 [--out FILE]

Each sentence is streamed through `bench.mt_simulation.simulate` (the reference client's
pacing, an ASR with a held-back tail) once per backend, the backends taking turns
sentence by sentence: on a machine shared with other jobs, load changes hit both
alike, so their ratio holds even when the absolute times do not. Reported per
backend: BLEU and chrF (simultaneous and offline), ideal and computation-aware
LAAL, and ms per update (p50, p95, max over every update, the final one included:
each is one call of the client, which gives up after 15 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.mt_data import DEFAULT_WORDS_PER_SECOND, load
from bench.mt_simul_summary import Summary, nearest_rank_percentile, summarize
from bench.mt_simulation import DEFAULT_PAUSE_COMMIT_MS, SentenceRun, simulate
from dragoman.config import load_settings
from dragoman.cpu import cpu_info
from dragoman.engines.mt.base import MTEngine
from dragoman.engines.mt.presets import DEFAULT_MODEL, PRESETS
from dragoman.engines.registry import create_mt_engine
from dragoman.logs import configure as configure_logs
from dragoman.streaming.alignatt_presets import policy_presets

BACKENDS = ("qwen-torch", "qwen-llama")


def default_preset(model: str) -> str:
    """The model's first preset: fast for the 0.5B, low_latency for the 1.5B."""
    return next(name for name, p in PRESETS.items() if p.model == model)


def row(backend: str, compute: str, summary: Summary, runs: Sequence[SentenceRun]) -> str:
    updates = [ms for r in runs for ms in r.update_ms]
    return (
        f"| {backend} | {compute} | {summary.sentences} | {summary.bleu_simul:.1f} | {summary.bleu_offline:.1f} "
        f"| {summary.chrf_simul:.1f} | {summary.chrf_offline:.1f} | {summary.laal_ideal_ms:.0f} "
        f"| {summary.laal_ca_ms:.0f} | {len(updates)} | {nearest_rank_percentile(updates, 50):.0f} "
        f"| {nearest_rank_percentile(updates, 95):.0f} "
        f"| {max(updates, default=float('nan')):.0f} | {statistics.fmean(updates) if updates else 0:.0f} "
        f"| {summary.offline_ms_mean:.0f} | {summary.calls_per_utterance:.1f} | {100 * summary.fast_path_share:.0f}% |"
    )


def report(
    name: str,
    preset: str,
    args: argparse.Namespace,
    engines: dict[str, MTEngine],
    runs: dict[str, list[SentenceRun]],
    loads: Sequence[float],
    elapsed: float,
) -> str:
    done = min(len(r) for r in runs.values())
    lines = [
        f"{name}, preset {preset}, {args.direction}, FLORES devtest first {done} lines at "
        f"{args.words_per_second} words/s, ASR tail {args.tail_words} words; backends interleaved per sentence.",
        f"CPU: {cpu_info().describe()}; ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'default')}, "
        f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'default')}. "
        f"1-minute load average {min(loads):.1f}-{max(loads):.1f} (mean {statistics.fmean(loads):.1f}) "
        f"on {os.cpu_count()} CPUs over {elapsed / 60:.0f} min.",
        "",
        "| backend | compute | sent. | BLEU simul | BLEU offline | chrF simul | chrF offline | LAAL ideal ms "
        "| LAAL CA ms | updates | ms/update p50 | p95 | max | mean | offline ms | calls/utt | fast-path |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for backend, engine in engines.items():
        info = engine.describe()
        compute = f"{info.compute_type} ({info.compute_reason})" if info.compute_reason else info.compute_type
        done_runs = runs[backend][:done]
        lines.append(row(backend, compute, summarize(args.direction, "flores", done_runs), done_runs))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mt_engines", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--preset", default=None, help="default: the model's first preset")
    parser.add_argument("--direction", default="en-de")
    parser.add_argument("--sentences", type=int, default=30)
    parser.add_argument("--tail-words", type=int, default=2)
    parser.add_argument("--words-per-second", type=float, default=DEFAULT_WORDS_PER_SECOND)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    configure_logs("warning", "console")
    preset = args.preset or default_preset(args.model)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    engines: dict[str, MTEngine] = {}
    for backend in backends:
        settings = load_settings(**{"mt.backend": backend, "mt.model": args.model, "mt.preset": preset})
        started = time.perf_counter()
        engines[backend] = create_mt_engine(settings.mt, settings.cache_dir)
        engines[backend].warm_up()
        print(f"{backend}: loaded in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    name = next(iter(engines.values())).name
    presets = policy_presets(name, preset)
    sentences = load("flores", args.direction, args.sentences, words_per_second=args.words_per_second)
    runs: dict[str, list[SentenceRun]] = {b: [] for b in backends}
    loads = [os.getloadavg()[0]]
    started = time.perf_counter()
    table = ""
    for index, sentence in enumerate(sentences, 1):
        for backend, engine in engines.items():
            run = simulate(
                sentence,
                engine,
                direction=args.direction,
                preset=preset,
                tail_words=args.tail_words,
                pause_commit_ms=DEFAULT_PAUSE_COMMIT_MS,
                presets=presets,
            )
            runs[backend].append(run)
            print(
                f"[{index}/{len(sentences)}] {backend}: max update {max(run.update_ms):.0f} ms\n"
                f"    simul:   {run.simul_text}\n    offline: {run.offline_text}",
                file=sys.stderr,
                flush=True,
            )
        loads.append(os.getloadavg()[0])
        # Rewritten after every sentence: a run cut short still leaves its table.
        table = report(name, preset, args, engines, runs, loads, time.perf_counter() - started)
        if args.out is not None:
            args.out.write_text(table, encoding="utf-8")
    for engine in engines.values():
        engine.close()
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
