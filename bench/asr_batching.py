"""Closed-loop throughput of the ASR worker: batched vs one step per engine call.

The server comparison (asr_load) measures batching under a real-time load, where
sessions coalesce audio and the demand follows the server's speed. This one fixes
the work: the same set of steady-state steps (an item's audio so far with its stable
prefix forced, as a session sends them) is submitted all at once to a
the `BatchingWorker`, batched and then serialized, and timed to the last result.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from bench.audio import RATE, SessionInput
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.workers import WorkerStats
from dragoman.streaming.stable_prefix import stable_prefix
from dragoman.transports.services import asr_worker


@dataclass(frozen=True)
class ClosedLoop:
    max_batch: int
    steps: int
    audio_seconds: float
    wall: float
    stats: WorkerStats

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.wall

    @property
    def audio_per_second(self) -> float:
        return self.audio_seconds / self.wall


def steady_steps(
    engine: ASREngine, inputs: list[SessionInput], seconds: float, unfixed_tokens: int = 5
) -> list[StepRequest]:
    """One step per input: its first `seconds` of audio, forced with the stable prefix of the
    hypothesis two seconds earlier (what the session would force at that point)."""
    requests: list[StepRequest] = []
    for item in inputs:
        audio = item.audio[: int(seconds * RATE)]
        earlier = audio[: max(1, len(audio) - 2 * RATE)]
        (result,) = engine.transcribe_batch([StepRequest(audio=earlier, language="en")])
        text = result.text if isinstance(result, StepResult) else ""
        prefix = stable_prefix(text, engine.tokenizer, unfixed_tokens)
        requests.append(StepRequest(audio=audio, prefix=prefix, language="en"))
    return requests


async def run_closed_loop(engine: ASREngine, requests: list[StepRequest], max_batch: int) -> ClosedLoop:
    """Submit every request at once to the server's ASR worker for `engine`; time the last result."""
    scheduler = asr_worker(engine, max_batch)
    await scheduler.start()
    try:
        began = time.perf_counter()
        await asyncio.gather(*(scheduler.submit(r) for r in requests))
        wall = time.perf_counter() - began
        stats = scheduler.stats
    finally:
        await scheduler.close()
    audio = sum(len(r.audio) for r in requests) / RATE
    return ClosedLoop(max_batch, len(requests), audio, wall, stats)


def closed_loop(
    engine: ASREngine, requests: list[StepRequest], batch: int, rounds: int = 2
) -> tuple[ClosedLoop, ClosedLoop]:
    """(batched, serialized), each the faster of `rounds` runs, alternated so drift hits both."""
    batched: list[ClosedLoop] = []
    serial: list[ClosedLoop] = []
    for _ in range(rounds):
        batched.append(asyncio.run(run_closed_loop(engine, requests, batch)))
        serial.append(asyncio.run(run_closed_loop(engine, requests, 1)))
    return min(batched, key=lambda r: r.wall), min(serial, key=lambda r: r.wall)
