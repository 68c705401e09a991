"""The transcription session driven in-process by the real engine, one item at a time.

Streaming: the sans-I/O `TranscriptionSession` is fed the clip in 100 ms appends
(its own input events: no wire protocol in between);
whenever a step becomes due it is run at once on the engine (so every step covers
exactly the chunks the seed's algorithm schedules, with no coalescing from a busy
server), then the item is committed and its final step run. Offline: one engine call
on the whole clip. Both use the same engine, language and text normalisation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench.audio import RATE, Audio, b64
from dragoman.config import Settings, load_settings
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.errors import ClientError
from dragoman.sessions.transcription.events import (
    AppendAudio,
    ClientEvent,
    CommitBuffer,
    Completed,
    Delta,
    Error,
    Failed,
    Partial,
)
from dragoman.sessions.transcription.session import EngineProfile, SessionConfig, TranscriptionSession

PIECE_SECONDS = 0.1


def settings_for(model: str, backend: str | None = None) -> Settings:
    overrides: dict[str, Any] = {"asr.model": model}
    if backend:
        overrides["asr.backend"] = backend
    return load_settings(None, **overrides)


def load_engine(settings: Settings) -> ASREngine:
    from dragoman.engines.registry import create_asr_engine

    return create_asr_engine(settings.asr, settings.cache_dir)


def profile_of(engine: ASREngine, settings: Settings) -> EngineProfile:
    """What the server's runtime tells each session about the engine (transports/runtime.py)."""
    return EngineProfile(
        name=engine.name,
        capabilities=engine.capabilities,
        tokenizer=engine.tokenizer,
        max_item_seconds=settings.transcription.max_item_seconds,
    )


@dataclass(frozen=True)
class Step:
    #: Audio the step decoded (the item's current window), in seconds.
    audio_seconds: float
    #: Wall time of the engine call.
    seconds: float
    final: bool
    prefix_chars: int
    #: The item's audio so far (the window is the part of it after the last seal).
    item_seconds: float = 0.0


@dataclass
class StreamRun:
    """What streaming one clip (one or more items) produced."""

    transcripts: list[str] = field(default_factory=list)
    deltas: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    #: Per item: from the append that completed the first chunk to its partial event.
    first_partial: list[float] = field(default_factory=list)
    partials: int = 0
    #: Partials whose text is not an extension of the item's previous partial (the unstable tail changed).
    rewrites: int = 0
    revisions: int = 0

    @property
    def transcript(self) -> str:
        return " ".join(t for t in self.transcripts if t)

    @property
    def items_revised(self) -> int:
        """Items whose concatenated deltas are not a prefix of their transcript."""
        return sum(not t.startswith(d) for t, d in zip(self.transcripts, self.deltas, strict=True))


class _Driver:
    def __init__(self, engine: ASREngine, session: TranscriptionSession, run: StreamRun) -> None:
        self.engine = engine
        self.session = session
        self.run = run
        self.item_delta = ""
        self.last_partial = ""
        self.awaiting_first = False
        self.available = 0.0

    def send(self, event: ClientEvent) -> None:
        self.session.receive(event)
        self.drain()

    def drain(self) -> None:
        """Run every due step at once, then collect the events it produced."""
        self.collect()
        while (job := self.session.next_job()) is not None:
            began = time.perf_counter()
            (result,) = self.engine.transcribe_batch([job.request])
            seconds = time.perf_counter() - began
            if isinstance(result, ClientError):
                self.session.job_failed(job, result)
            else:
                assert isinstance(result, StepResult)
                self.session.job_done(job, result)
            self.run.steps.append(
                Step(
                    len(job.request.audio) / RATE,
                    seconds,
                    job.final,
                    len(job.request.prefix),
                    item_seconds=job.item.samples / RATE,
                )
            )
            self.collect()
        # next_job may complete a committed item without an engine call (its last step covered it).
        self.collect()

    def collect(self) -> None:
        for event in self.session.events_to_send():
            if isinstance(event, Partial):
                self.run.partials += 1
                self.run.rewrites += not event.text.startswith(self.last_partial)
                self.last_partial = event.text
                if self.awaiting_first:
                    self.run.first_partial.append(time.perf_counter() - self.available)
                    self.awaiting_first = False
            elif isinstance(event, Delta):
                self.item_delta += event.delta
            elif isinstance(event, Completed):
                self.run.transcripts.append(event.transcript)
                self.run.deltas.append(self.item_delta)
                self.item_delta = self.last_partial = ""
            elif isinstance(event, Error | Failed):
                raise RuntimeError(f"the session reported {type(event).__name__}: {event.error.message}")


def stream(
    engine: ASREngine, profile: EngineProfile, parts: tuple[Audio, ...], config: SessionConfig
) -> StreamRun:
    """Stream each part as one item of one session: 100 ms appends, then a commit."""
    run = StreamRun()
    session = TranscriptionSession("sess_bench", profile, config)
    driver = _Driver(engine, session, run)
    driver.collect()
    piece = int(PIECE_SECONDS * RATE)
    for audio in parts:
        driver.awaiting_first = True
        for start in range(0, len(audio), piece):
            payload = b64(audio[start : start + piece])
            driver.available = time.perf_counter()
            driver.send(AppendAudio(payload))
        driver.awaiting_first = False
        driver.send(CommitBuffer())
    run.revisions = session.revisions
    return run


def offline(engine: ASREngine, parts: tuple[Audio, ...], language: str | None) -> tuple[str, float]:
    """One engine call per part (the whole clip when it fits the cap); the text and the time taken."""
    texts: list[str] = []
    began = time.perf_counter()
    for audio in parts:
        (result,) = engine.transcribe_batch([StepRequest(audio=audio, language=language)])
        if isinstance(result, ClientError):
            raise RuntimeError(f"the engine refused an offline request: {result.message}")
        assert isinstance(result, StepResult)
        texts.append(result.text.strip())
    return " ".join(t for t in texts if t), time.perf_counter() - began
