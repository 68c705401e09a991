"""The over-the-wire sections of `python -m bench.asr_streaming`: concurrency and batching.

A real `dragoman serve --services transcription` (`bench.server`) loaded by concurrent
sessions at real-time pace (`bench.asr_load`, or `bench.asr_continuous` for `server_vad`):
the table of session counts (section 3), and the same load against a server that runs one
step per engine call, with the closed-loop worker comparison (section 4).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench import server as dragoman_server
from bench.asr_batching import ClosedLoop
from bench.asr_continuous import __doc__ as continuous_doc
from bench.asr_continuous import continuous_inputs, run_vad_load
from bench.asr_load import LoadResult, StreamSettings, run_load
from bench.asr_streaming_plan import Plan
from bench.audio import Clip, session_inputs
from bench.report import log, percentile, table

#: What the continuous sessions are, for the report: the module docstring's body, one paragraph.
ASR_CONTINUOUS = " ".join((continuous_doc or "").split("\n\n", 1)[-1].split()) + "\n"


def pct(value: float) -> str:
    return "–" if value != value else f"{100 * value:.1f} %"


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
