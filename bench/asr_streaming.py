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
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench import asr_inprocess as inproc
from bench import server as dragoman_server
from bench.asr_batching import ClosedLoop, closed_loop, steady_steps
from bench.asr_continuous import __doc__ as continuous_doc
from bench.asr_continuous import continuous_inputs, run_vad_load
from bench.asr_load import LoadResult, StreamSettings, run_load
from bench.audio import RATE, Clip, session_inputs, wer_clips
from bench.report import header, log, percentile, table
from bench.results import record
from dragoman.engines.asr.base import ASREngine
from dragoman.logs import configure as configure_logs
from dragoman.sessions.transcription.session import EngineProfile, SessionConfig
from dragoman.tools.wer import wer

#: What the continuous sessions are, for the report: the module docstring's body, one paragraph.
ASR_CONTINUOUS = " ".join((continuous_doc or "").split("\n\n", 1)[-1].split()) + "\n"

SECTIONS = ("wer", "revisions", "steps", "concurrency", "batching")
#: The WER goal of the issue: streaming WER at most this times the offline WER.
WER_GOAL = 1.15


def pct(value: float) -> str:
    return "–" if value != value else f"{100 * value:.1f} %"


@dataclass(frozen=True)
class Plan:
    quick: bool
    model: str
    #: Streaming settings compared in the WER and revision benchmarks (the first is the default).
    configs: tuple[tuple[str, SessionConfig], ...]
    wer_range: tuple[float, float]
    step_seconds: float
    sessions: tuple[int, ...]
    session_seconds: float
    batching_sessions: int

    #: The re-decode window of the first config (`--max-window`); the second has none.
    max_window: float = 10.0
    #: The ASR backend (`--backend`); None: the configured default.
    backend: str | None = None
    #: The server's engine calls at once (`--parallel-calls`); None: the server's choice.
    parallel_calls: int | None = None
    #: "server_vad": sessions of continuous speech whose items the server cuts
    #: (`bench.asr_continuous`); None: each session one item, committed by the client.
    turn_detection: str | None = None

    @classmethod
    def make(cls, quick: bool, model: str, max_window: float = 10.0) -> Plan:
        default = (
            f"default (chunk 2 s, unfixed 2 chunks / 5 tokens, window {max_window:g} s)",
            SessionConfig(language="en", max_window_seconds=max_window),
        )
        whole = (
            "window off (every step decodes the whole item)",
            SessionConfig(language="en", max_window_seconds=0.0),
        )
        faster = ("chunk 1 s", SessionConfig(language="en", chunk_seconds=1.0, max_window_seconds=max_window))
        if quick:
            return cls(True, model, (default, whole), (5.0, 9.0), 10.0, (1, 4), 10.0, 4, max_window)
        return cls(
            False,
            model,
            (default, whole, faster),
            (0.0, float("inf")),
            30.0,
            (1, 2, 4, 8, 16, 24),
            20.0,
            16,
            max_window,
        )


# -- in-process: WER, revisions, step times -------------------------------------------------


@dataclass
class WerRun:
    clips: list[Clip]
    offline: list[str]
    offline_seconds: float
    streamed: dict[str, list[inproc.StreamRun]]


def run_wer(engine: ASREngine, plan: Plan, profile: EngineProfile, cap: float) -> WerRun:
    shortest, longest = plan.wer_range
    clips = wer_clips(cap, shortest=shortest, longest=longest)
    offline: list[str] = []
    offline_seconds = 0.0
    for clip in clips:
        text, seconds = inproc.offline(engine, clip.parts, "en")
        offline.append(text)
        offline_seconds += seconds
    log(f"offline: {len(clips)} clips in {offline_seconds:.1f} s")
    streamed: dict[str, list[inproc.StreamRun]] = {}
    for name, config in plan.configs:
        began = time.perf_counter()
        streamed[name] = [inproc.stream(engine, profile, clip.parts, config) for clip in clips]
        steps = sum(len(r.steps) for r in streamed[name])
        log(f"streaming [{name}]: {steps} steps in {time.perf_counter() - began:.1f} s")
    return WerRun(clips, offline, offline_seconds, streamed)


def report_wer(run: WerRun, cap: float, plan: Plan) -> None:
    refs = [c.row.reference for c in run.clips]
    offline_wer = wer(refs, run.offline)
    split = [c.row.name for c in run.clips if len(c.parts) > 1]
    subset = (
        " (only the recordings of {:g}-{:g} s)".format(*plan.wer_range)
        if plan.wer_range != (0.0, float("inf"))
        else ""
    )
    print("## 1. Streaming vs offline WER (English, in-process)\n")
    print(
        f"{len(run.clips)} English rows of asr.tsv{subset}, {sum(c.seconds for c in run.clips):.0f} s of audio. Left out: "
        "the weak references (en_vosk_digits, en_fw_stereo_2ch) and the row without an English "
        f"transcript (st/en_covost2_st_to_de). Longer than the {cap:g} s item cap and split into equal "
        f"parts, each its own item, transcripts joined: {', '.join(split) or 'none'}. Language fixed to en "
        "for both. Streaming: the session fed 100 ms appends, each due step run at once, then a commit. "
        "Offline: one engine call per clip (per part). Corpus WER over normalised text.\n"
    )
    rows: list[list[object]] = []
    for name, runs in run.streamed.items():
        streaming_wer = wer(refs, [r.transcript for r in runs])
        ratio = streaming_wer / offline_wer if offline_wer else float("nan")
        verdict = "yes" if streaming_wer <= WER_GOAL * offline_wer + 1e-9 else "no"
        steps = sum(len(r.steps) for r in runs)
        rows.append([name, pct(offline_wer), pct(streaming_wer), f"{ratio:.3f}", verdict, steps])
        if name == next(iter(run.streamed)) and not plan.quick:  # the defaults (bench/results.py)
            record(
                "asr_streaming",
                "streaming transcription WER",
                f"streaming / offline WER, {plan.model}",
                ratio,
                "×",
                target=f"≤ {WER_GOAL:g}×",
                met=verdict == "yes",
                conditions=f"{pct(streaming_wer)} / {pct(offline_wer)}; {len(run.clips)} English recordings",
            )
    print(table(["streaming setting", "offline WER", "streaming WER", "ratio", "≤ 1.15×", "steps"], rows))
    names = list(run.streamed)
    headers = ["clip", "s", "offline WER", *(f"streaming WER ({n.split(' (')[0]})" for n in names)]
    detail = []
    for i, clip in enumerate(run.clips):
        row: list[object] = [clip.row.name, f"{clip.seconds:.1f}", pct(wer([refs[i]], [run.offline[i]]))]
        row += [pct(wer([refs[i]], [run.streamed[n][i].transcript])) for n in names]
        detail.append(row)
    print("\n<details><summary>per clip</summary>\n")
    print(table(headers, detail))
    print("\n</details>\n")


def report_revisions(run: WerRun, load_results: list[LoadResult]) -> None:
    print("## 5. Delta revisions\n")
    print(
        "A revision is a step whose firm text contradicts deltas already sent (the session's "
        "`revisions` counter); an item is revised when its concatenated deltas are not a prefix "
        "of its completed transcript.\n"
    )
    rows: list[list[object]] = []
    for name, runs in run.streamed.items():
        items = sum(len(r.transcripts) for r in runs)
        revisions = sum(r.revisions for r in runs)
        revised = sum(r.items_revised for r in runs)
        rewrites = f"{sum(r.rewrites for r in runs)}/{sum(r.partials for r in runs)}"
        rows.append(
            [f"in-process, {name}", items, revisions, f"{100 * revisions / items:.1f}", revised, rewrites]
        )
    for result in load_results:
        label = f"server, {result.sessions} sessions, {batch_label(result.max_batch)}"
        rows.append([label, result.completed, "–", "–", result.revised, "–"])
    headers = [
        "run",
        "items",
        "revision steps",
        "per 100 items",
        "items revised",
        "partials rewriting the tail",
    ]
    print(table(headers, rows))
    print(
        "\nDeltas carry only the stable prefix the next step is forced to start with, so a revision "
        "needs an engine result that does not start with its forced prefix. The last column counts "
        "partial events whose text does not extend the item's previous partial: the unstable tail "
        "being rewritten, which clients of `mstar.transcription.partial` see.\n"
    )


def run_steps(engine: ASREngine, profile: EngineProfile, plan: Plan, clips: list[Clip]) -> None:
    """Step time as the item grows, with the window (after) and without it (before), in one run."""
    longest = max(clips, key=lambda c: max(len(p) for p in c.parts))
    audio = max(longest.parts, key=len)[: int(plan.step_seconds * RATE)]
    windowed = SessionConfig(language="en", max_window_seconds=plan.max_window)
    whole = SessionConfig(language="en", max_window_seconds=0.0)
    # Interleaved, twice each, so that a change in the machine's load hits both alike.
    runs: dict[str, list[inproc.StreamRun]] = {"on": [], "off": []}
    for _ in range(2):
        runs["off"].append(inproc.stream(engine, profile, (audio,), whole))
        runs["on"].append(inproc.stream(engine, profile, (audio,), windowed))
    print("## 2. Step cost against audio length, before and after the window (in-process)\n")
    print(
        f"{longest.row.name}, first {len(audio) / RATE:.1f} s, streamed twice without a window (every step "
        f"re-decodes the whole item: before) and twice with a {plan.max_window:g} s window (after), "
        "interleaved. Times are the engine call's wall time (best of the two runs).\n"
    )
    rows: list[list[object]] = []
    pairs = zip(
        zip(*(r.steps for r in runs["off"]), strict=True),
        zip(*(r.steps for r in runs["on"]), strict=True),
        strict=False,
    )
    totals = [0.0, 0.0]
    for off, on in pairs:
        kind = "final" if off[0].final else "partial"
        best_off, best_on = min(s.seconds for s in off), min(s.seconds for s in on)
        totals[0] += best_off
        totals[1] += best_on
        rows.append(
            [
                f"{off[0].item_seconds:.1f}",
                kind,
                f"{best_off:.3f}",
                f"{on[0].audio_seconds:.1f}",
                f"{best_on:.3f}",
            ]
        )
    print(
        table(["item audio s", "step", "step time s (no window)", "window s", "step time s (window)"], rows)
    )
    print(f"\nTotal step time: {totals[0]:.2f} s without the window, {totals[1]:.2f} s with it.\n")


def report_first_partial(run: WerRun) -> None:
    firsts = [lat for r in next(iter(run.streamed.values())) for lat in r.first_partial]
    print(
        f"First-partial latency in-process (default settings, {len(firsts)} items of the WER set: from "
        "the append that completes the first chunk to the partial event): "
        f"p50 {percentile(firsts, 50):.3f} s, max {max(firsts, default=float('nan')):.3f} s. "
        "Over the wire, under load, see the first-partial column of table 3.\n"
    )


# -- over the wire: concurrency and batching -----------------------------------------------------


def batch_label(max_batch: int | None) -> str:
    return "default max batch" if max_batch is None else f"max batch {max_batch}"


def serve_args(
    model: str,
    max_batch: int | None,
    max_window: float = 10.0,
    backend: str | None = None,
    parallel_calls: int | None = None,
    sessions: int = 32,
) -> list[str]:
    args = ["serve", "--services", "transcription", "--asr-model", model, "--log-level", "warning"]
    args += ["--asr-backend", backend] if backend else []
    args += ["--asr-parallel-calls", str(parallel_calls)] if parallel_calls else []
    # The default limit (16 transcription sessions) would refuse the largest loads.
    args += ["--max-transcription-sessions", str(max(32, sessions))]
    args += ["--max-window-seconds", f"{max_window:g}"]
    return args + (["--asr-max-batch", str(max_batch)] if max_batch is not None else [])


def run_server_loads(
    plan: Plan, clips: list[Clip], counts: Sequence[int], max_batch: int | None, workdir: Path
) -> list[LoadResult]:
    settings = StreamSettings(turn_detection=plan.turn_detection)
    log_path = workdir / f"dragoman-{max_batch or 'default'}.log"
    results: list[LoadResult] = []
    began = time.perf_counter()
    with dragoman_server.running(
        serve_args(plan.model, max_batch, plan.max_window, plan.backend, plan.parallel_calls, max(counts)),
        log_path,
    ) as srv:
        log(f"server ({batch_label(max_batch)}) up in {time.perf_counter() - began:.1f} s")
        continuous = plan.turn_detection is not None
        make_inputs = continuous_inputs if continuous else session_inputs
        run = run_vad_load if continuous else run_load
        for count in counts:
            inputs = make_inputs(clips, count, plan.session_seconds)
            before = coalesced_steps(srv.http)
            try:
                result = asyncio.run(run(srv.ws, inputs, settings, max_batch))
                result = dataclasses.replace(result, coalesced=coalesced_steps(srv.http) - before)
            except Exception:
                log(f"{count} sessions failed; the server's log ends:\n{srv.log_tail()}")
                raise
            log(
                f"{count} sessions: p95 lag {percentile(result.boundary_lags(), 95):.2f} s, "
                f"{result.completed}/{count} completed, {len(result.errors)} errors"
            )
            results.append(result)
    return results


def coalesced_steps(http: str) -> int:
    """The server's count of partial steps skipped under load, from `GET /metrics`."""
    with urllib.request.urlopen(f"{http}/metrics", timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "dragoman_transcription_steps_coalesced":
            return int(sum(sample.value for sample in family.samples if sample.name.endswith("_total")))
    return 0


def load_row(result: LoadResult, chunk: float) -> list[object]:
    reported, boundary = result.lags(), result.boundary_lags()
    worst = max(percentile(reported, 95), percentile(boundary, 95))
    seconds = sum(t.seconds for t in result.traces) / len(result.traces)
    done = f"{result.completed}/{result.sessions}"
    return [
        result.sessions,
        f"{seconds:.1f}",
        len(reported),
        f"{percentile(boundary, 50):.2f} / {percentile(boundary, 95):.2f}",
        f"{percentile(reported, 50):.2f} / {percentile(reported, 95):.2f}",
        f"{max(boundary + reported, default=float('nan')):.2f}",
        f"{percentile(result.first_lags(), 50):.2f}",
        f"{percentile(result.final_lags(), 50):.2f} / {percentile(result.final_lags(), 95):.2f}",
        f"{result.steps / result.wall:.2f}",
        f"{result.audio_decoded / result.wall:.1f}",
        pct(result.wer()),
        result.coalesced,
        done + (f", {len(result.errors)} errors" if result.errors else ""),
        "yes" if worst < chunk else "no",
    ]


LOAD_HEADERS = [
    "sessions",
    "audio s each",
    "partials",
    "lag from chunk p50 / p95 s",
    "lag from audio_seconds p50 / p95 s",
    "lag max s",
    "first partial p50 s",
    "final p50 / p95 s",
    "steps/s",
    "audio s decoded/s",
    "WER",
    "steps coalesced",
    "completed",
    "keeps up",
]


def report_concurrency(results: list[LoadResult], turn_detection: str | None = None) -> None:
    chunk = StreamSettings().chunk_seconds
    print("## 3. Concurrent sessions at real-time pace (one server, default batching)\n")
    if turn_detection:
        print(f"**Continuous speech, `{turn_detection}`** (`bench/asr_continuous.py`): " + ASR_CONTINUOUS)
    print(
        "A real `dragoman serve --services transcription` on 127.0.0.1; each session is a plain "
        "`websockets` client (the openai SDK parses every event into pydantic models, CPU the "
        "server would lose on 2 cores) streaming one real recording, or a window of a longer one, "
        "in 100 ms appends on a wall-clock schedule, then a commit; starts spread over one chunk. "
        "Lag of a partial = "
        "arrival − when the audio up to its `audio_seconds` had been sent, and the same from the "
        "chunk boundary at or before `audio_seconds` (the audio a step starts from while the server "
        "keeps up; it does not depend on which clock the server reports); first partial: the "
        "boundary lag of each session's first; final: completed − commit. Keeps up: both p95 lags "
        f"< chunk_seconds ({chunk:g} s). WER: over the items that are whole recordings (the others "
        "are windows of longer ones). Steps/s and audio decoded count every step the server "
        "reported over the run's wall time (under real-time pace they follow the demand until "
        "the server saturates).\n"
    )
    print(table(LOAD_HEADERS, [load_row(r, chunk) for r in results]))
    print()


def report_closed_loop(batched: ClosedLoop, serial: ClosedLoop) -> None:
    seconds = batched.audio_seconds / batched.steps
    print(
        f"Closed loop, in-process: the same {batched.steps} steady-state steps (each {seconds:.1f} s of "
        "audio on average with its stable prefix forced) submitted at once to the `BatchingWorker`; "
        "best of two alternated runs each.\n"
    )
    rows = [
        [
            f"max batch {r.max_batch}",
            r.steps,
            f"{r.wall:.2f}",
            f"{r.steps_per_second:.2f}",
            f"{r.audio_per_second:.1f}",
            r.stats.calls,
            f"{r.stats.mean_batch:.1f}",
        ]
        for r in (batched, serial)
    ]
    print(table(["scheduler", "steps", "wall s", "steps/s", "audio s/s", "engine calls", "mean batch"], rows))
    print(f"\nBatched / serialized: {batched.steps_per_second / serial.steps_per_second:.2f}× steps/s.\n")


def report_batching(batched: LoadResult, serial: LoadResult) -> None:
    chunk = StreamSettings().chunk_seconds
    print(f"## 4. Batched vs one-at-a-time steps ({batched.sessions} sessions, same load)\n")
    print(
        "The load of table 3 against a second server started with `--asr-max-batch 1`, so every "
        "engine call carries one step. Sessions coalesce the audio that arrives while a step waits, "
        "so a slower server runs fewer, longer steps: audio decoded per second is the fairer "
        "throughput figure.\n"
    )
    rows = [
        ["batched (default max batch)", *load_row(batched, chunk)[1:]],
        ["serialized (--asr-max-batch 1)", *load_row(serial, chunk)[1:]],
    ]
    print(table(["server", *LOAD_HEADERS[1:]], rows))
    steps_ratio = (batched.steps / batched.wall) / (serial.steps / serial.wall)
    audio_ratio = (batched.audio_decoded / batched.wall) / (serial.audio_decoded / serial.wall)
    p95 = percentile(batched.boundary_lags(), 95), percentile(serial.boundary_lags(), 95)
    print(
        f"\nBatched / serialized: steps/s {steps_ratio:.2f}×, audio s decoded/s {audio_ratio:.2f}×; "
        f"p95 lag from chunk {p95[0]:.2f} s vs {p95[1]:.2f} s.\n"
    )


# -- the run ------------------------------------------------------------------------------------------


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
