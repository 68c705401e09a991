"""The services a server runs: each one's shared engine, its worker and its limits.

Engines are loaded once and shared by every session of a service, through one
worker (`engines/workers/`): sessions never get model copies of their own, so
raising the session count never loads another copy. A service is loaded and warmed
(`start`) before the server says it is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from dragoman.audio.vad import SileroModel, SileroVAD, SpeechProbability
from dragoman.config import ASRSettings, MTSettings, TranscriptionSettings
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.mt.base import MTDraft, MTEngine, MTRequest
from dragoman.engines.mt.lanes import MTLanes
from dragoman.engines.mt.presets import AUTO_PRESET, auto_preset_for
from dragoman.engines.registry import create_asr_engine, create_mt_engine
from dragoman.engines.turn.smart_turn import SmartTurnModel
from dragoman.engines.workers import BatchingWorker, Housekeeping, SerialWorker, Streamed
from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger, log_failure
from dragoman.protocol.realtime.generation import Generation, default_input_rate
from dragoman.sessions.mt.session import MAX_QUEUED_FINALS
from dragoman.sessions.speech.config import EngineProfile
from dragoman.sessions.transcription.session import TranscriptionSession, default_config
from dragoman.streaming.alignatt import AlignAttParams, prepare_units
from dragoman.streaming.alignatt_presets import policy_presets
from dragoman.streaming.turns import TurnCompletion
from dragoman.weights import resolve

log = get_logger(__name__)


class TranscriptionService:
    """Whisper behind a batching worker, and the VAD and turn models every session's turn
    detector uses."""

    name = "transcription"

    def __init__(
        self,
        asr: ASRSettings,
        transcription: TranscriptionSettings,
        cache_dir: Path,
        scoped_routes: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.asr = asr
        self.settings = transcription
        self.cache_dir = cache_dir
        #: ASR routes of one service's steps (`StepRequest.scope`): the interpreter's.
        self.scoped_routes = dict(scoped_routes or {})
        self.engine: ASREngine | None = None
        self.worker: BatchingWorker[StepRequest, StepResult] | None = None
        self.profile: EngineProfile | None = None
        self.vad_model: SileroModel | None = None
        self.turn_model: SmartTurnModel | None = None
        #: Transcription sessions open now (the agent's turns are not counted).
        self.sessions = 0

    async def start(self) -> None:
        began = time.perf_counter()
        # In threads: the event loop keeps answering /health while the models load.
        engine = await asyncio.to_thread(create_asr_engine, self.asr, self.cache_dir, self.scoped_routes)
        self.vad_model = await asyncio.to_thread(SileroModel.load, resolve("silero-vad", self.cache_dir))
        self.turn_model = await asyncio.to_thread(load_turn_model, self.cache_dir)
        await asyncio.to_thread(engine.warm_up)
        self.worker = asr_worker(engine, self.asr.max_batch)
        await self.worker.start()
        self.profile = EngineProfile(
            name=engine.name,
            capabilities=engine.capabilities,
            tokenizer=engine.tokenizer,
            max_item_seconds=self.settings.max_item_seconds,
        )
        self.engine = engine
        info = engine.describe().as_dict()
        log.info(
            "transcription ready",
            **info,
            threads=self.asr.threads,
            seconds=round(time.perf_counter() - began, 2),
        )

    @contextlib.contextmanager
    def session_slot(self) -> Iterator[bool]:
        """One of the `max_sessions` slots for the `with` block, or False at the limit.

        Checked and taken in one step, with no await between: a route that took the slot
        before its first await (the WebSocket accept) cannot be overtaken by concurrent
        handshakes that all saw the last slot free.
        """
        if self.sessions >= self.settings.max_sessions:
            yield False
            return
        self.sessions += 1
        try:
            yield True
        finally:
            self.sessions -= 1

    def new_session(self, session_id: str, generation: Generation) -> TranscriptionSession:
        """A transcription session on the defaults of a client of `generation`."""
        assert self.profile is not None, "served once started"
        vad_factory = self.vad_factory()
        return TranscriptionSession(
            session_id=session_id,
            engine=self.profile,
            config=default_config(self.settings, default_input_rate(generation), vad=vad_factory is not None),
            vad_factory=vad_factory,
            turn_model_factory=self.turn_model_factory(),
        )

    def vad_factory(self) -> Callable[[], SpeechProbability] | None:
        model = self.vad_model
        if model is None:
            return None
        return lambda: SileroVAD(model)

    def turn_model_factory(self) -> Callable[[], TurnCompletion] | None:
        """semantic_vad's turn model: one shared, stateless instance (None: semantic_vad is refused)."""
        model = self.turn_model
        if model is None:
            return None
        return lambda: model.completion_probability

    def model_names(self) -> list[str]:
        return [self.engine.name] if self.engine is not None else []

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.close()
        if self.engine is not None:
            close_engine("asr", self.engine.close)
        self.engine = self.worker = None


MTCall = MTRequest | Streamed[MTRequest]


def mt_worker(engine: MTEngine) -> SerialWorker[MTCall, MTDraft] | BatchingWorker[MTCall, MTDraft]:
    """One engine call at a time ("the server serializes all MT work on one engine"); for
    an engine whose calls wait on remote nodes, `parallel_calls` of them at once, one draft
    each; for local lanes (`engines.mt.lanes`), one draft a lane, a session's on its own.
    A streaming job's request (`Streamed`) reaches the engine as `MTRequest.on_pass`."""

    def draft(call: MTCall) -> MTDraft:
        if isinstance(call, Streamed):
            return engine.draft(replace(call.request, on_pass=call.emit))
        return engine.draft(call)

    lanes = engine.capabilities.parallel_calls
    if lanes <= 1:
        return SerialWorker(draft, name="mt")
    lane_for = engine.lane_for if isinstance(engine, MTLanes) else None
    return BatchingWorker(
        lambda calls: [draft(call) for call in calls],
        name="mt",
        max_batch=1,
        lanes=lanes,
        exclusive=None if lane_for is None else lambda call: lane_for(unstreamed(call)),
    )


def unstreamed(call: MTCall) -> MTRequest:
    return call.request if isinstance(call, Streamed) else call


def close_engine(role: str, close: Callable[[], None]) -> None:
    """Release an engine at shutdown. A failure is logged with its error id and traceback,
    and does not keep the other engines from being released."""
    try:
        close()
    except Exception as exc:
        log_failure(log, "engine close failed", exc, role=role)


def load_turn_model(cache_dir: Path) -> SmartTurnModel | None:
    """The packaged Smart Turn model, or None (logged) when its package is missing: the server
    still serves server_vad, and refuses semantic_vad."""
    try:
        return SmartTurnModel.load(resolve("smart-turn-v3.2", cache_dir))
    except ModelUnavailable as exc:
        log.warning("no turn model: semantic_vad is off", reason=str(exc))
        return None


def asr_worker(engine: ASREngine, max_batch: int) -> BatchingWorker[StepRequest, StepResult]:
    """The worker that batches every session's steps into `transcribe_batch` calls."""
    return BatchingWorker(
        engine.transcribe_batch,
        name="asr",
        max_batch=max_batch,
        batch_key=engine.batch_key,
        tags=lambda request: request.tags,
        lanes=engine.capabilities.parallel_calls,
    )


class MTService:
    """The MT engine behind its worker (one serial worker, or one call a lane: `mt_worker`),
    its presets and the session limit; shared by every MT connection."""

    name = "mt"

    def __init__(
        self,
        engine_factory: Callable[[], MTEngine],
        *,
        default_preset: str,
        max_sessions: int,
        max_utterance_words: int,
        presets: Mapping[str, AlignAttParams] | None = None,
        max_queued_finals: int = MAX_QUEUED_FINALS,
    ) -> None:
        #: Preset name -> policy; None: the presets of the loaded model (`policy_presets`).
        self._given_presets = dict(presets) if presets is not None else None
        self.presets: dict[str, AlignAttParams] = dict(presets or {})
        self.default_preset = default_preset
        self.max_sessions = max_sessions
        self.max_utterance_words = max_utterance_words
        self.max_queued_finals = max_queued_finals
        self._engine_factory = engine_factory
        self.engine: MTEngine | None = None
        self.worker: SerialWorker[MTCall, MTDraft] | BatchingWorker[MTCall, MTDraft] | None = None
        self.directions: list[str] = []
        self.sessions = 0
        self._housekeeping = Housekeeping()

    @classmethod
    def from_settings(cls, mt: MTSettings, cache_dir: Path) -> MTService:
        def load() -> MTEngine:
            return create_mt_engine(mt, cache_dir)

        return cls(
            load,
            default_preset=mt.preset,
            max_sessions=mt.max_sessions,
            max_utterance_words=mt.max_utterance_words,
            max_queued_finals=mt.max_queued_finals,
        )

    async def start(self) -> None:
        """Load and warm the engine (in threads: it takes seconds), then start its worker."""
        engine = await asyncio.to_thread(self._engine_factory)
        if self.default_preset == AUTO_PRESET:  # chosen by the engine's factory, or by the model
            self.default_preset = engine.chosen_preset or auto_preset_for(engine.name)
        try:
            presets = self._given_presets or policy_presets(engine.name, self.default_preset)
            if self.default_preset not in presets:
                raise ConfigError(
                    f"unknown MT preset {self.default_preset!r}; known: {', '.join(sorted(presets))}"
                )
            await asyncio.to_thread(engine.warm_up)
        except BaseException:
            engine.close()
            raise
        self.presets = presets
        self.engine = engine
        self.directions = list(engine.directions())
        for target in {direction.partition("-")[2] for direction in self.directions}:
            await asyncio.to_thread(prepare_units, target)
        self.worker = mt_worker(engine)
        log.info(
            "mt ready", **engine.describe().as_dict(), directions=self.directions, preset=self.default_preset
        )

    def model_names(self) -> list[str]:
        return [self.engine.name] if self.engine is not None else []

    @property
    def waiting(self) -> int:
        """Sessions (serial) or drafts (remote nodes) waiting for the engine now."""
        worker = self.worker
        if isinstance(worker, BatchingWorker):
            return worker.stats.queued
        return worker.waiting if worker is not None else 0

    def forget(self, cache_key: str) -> None:
        """Drop a closed session's engine cache, on the engine's thread, after the work that waits."""
        worker, engine = self.worker, self.engine
        if isinstance(worker, SerialWorker) and engine is not None:
            self._housekeeping.later(worker, lambda: engine.forget(cache_key), f"mt-forget-{cache_key}")
        elif engine is not None:  # remote nodes: closing the node session needs no engine turn
            self._housekeeping.soon(lambda: engine.forget(cache_key), f"mt-forget-{cache_key}")

    async def close(self) -> None:
        self._housekeeping.cancel()
        if self.worker is not None:
            await self.worker.close()  # waits for the call in flight before the engine goes
        if self.engine is not None:
            close_engine("mt", self.engine.close)
        self.engine = self.worker = None
