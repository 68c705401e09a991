"""The voice agent's service: its shared engines, their workers, the pool and the counters.

The agent listens with the transcription service's engine (its Whisper, its
batching worker and its VAD), so an agent session's turns batch with
transcription sessions' steps. It adds the LLM and the TTS voices, each loaded once
behind a serial worker that every session takes turns on, and the pool of
pipeline units that bounds the sessions (`pool.py`).

Each spoken response logs one `agent stages` line: when its LLM call began on the
worker (`llm_started_at`, epoch seconds) and, in ms from then, its first token, its
first clause as the response cuts it (and the LLM pieces made by then), and its first
clause's TTS call and first audio chunk. The clock stays here, out of the sans-I/O session (bench/agent_latency.py reads it).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dragoman.config import AgentSettings, LLMSettings, TTSSettings
from dragoman.engines.llm.base import ChatRequest, Finished, LLMEngine, LLMPiece, TextPiece
from dragoman.engines.registry import create_llm_engine
from dragoman.engines.tts.speaker import Speaker
from dragoman.engines.workers import CancelToken, Housekeeping, Priority, SerialWorker, Streamed
from dragoman.logs import get_logger
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.jobs import ASR, LLM, TTS, SpeakRequest
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.agent.session import AgentSession
from dragoman.sessions.speech.config import SessionConfig
from dragoman.streaming.clauses import ClauseCutter, speakable
from dragoman.transports.lanes import Lane
from dragoman.transports.pool import PipelinePool
from dragoman.transports.services import TranscriptionService, close_engine

log = get_logger(__name__)

T = TypeVar("T")
Emit = Callable[[T], None]
#: An engine's streaming call: the request, its cancel token, where its pieces go.
Generate = Callable[[ChatRequest, CancelToken, Emit[LLMPiece]], Finished]
Synthesize = Callable[[SpeakRequest, CancelToken, Emit[bytes]], None]

#: Counters of `GET /v1/usage`, in the order shown.
USAGE_COUNTERS = (
    "sessions_opened",
    "sessions_refused",
    "responses",
    "responses_cancelled",
    "barge_ins",
    "tool_calls",
    "llm_input_tokens",
    "llm_output_tokens",
    "llm_cached_tokens",
    "output_audio_seconds",
)


class AgentService:
    name = "agent"

    def __init__(
        self,
        agent: AgentSettings,
        llm: LLMSettings,
        tts: TTSSettings,
        cache_dir: Path,
        transcription: TranscriptionService,
    ) -> None:
        self.settings = agent
        self.llm_settings = llm
        self.tts_settings = tts
        self.cache_dir = cache_dir
        self.transcription = transcription
        self.llm: LLMEngine | None = None
        self.speaker: Speaker | None = None
        self.llm_worker: SerialWorker[Streamed[ChatRequest], Finished] | None = None
        self.tts_worker: SerialWorker[Streamed[SpeakRequest], None] | None = None
        self.pool = PipelinePool(agent.num_pipelines)
        self.usage: defaultdict[str, float] = defaultdict(float)
        self.stages = StageClock()
        self._housekeeping = Housekeeping()

    async def start(self) -> None:
        began = time.perf_counter()
        llm = await asyncio.to_thread(create_llm_engine, self.llm_settings, self.cache_dir)
        speaker = Speaker(self.tts_settings, self.cache_dir)
        try:
            await asyncio.to_thread(llm.warm_up, self.settings.instructions)
            await asyncio.to_thread(speaker.load)
        except BaseException:
            llm.close()
            speaker.close()
            raise
        self.llm, self.speaker = llm, speaker
        stages = self.stages
        self.llm_worker = SerialWorker(lambda call: stages.generate(call, llm.stream), name="llm")
        self.tts_worker = SerialWorker(
            lambda call: stages.speak(call, functools.partial(_speak, speaker)), name="tts"
        )
        log.info(
            "agent ready",
            llm=llm.describe().as_dict(),
            voices=[info.as_dict() for info in speaker.describe()],
            default_voice=speaker.catalog.voice_for(None).name,
            pipelines=self.settings.num_pipelines,
            seconds=round(time.perf_counter() - began, 2),
        )

    # -- sessions ------------------------------------------------------------------

    def new_session(self, session_id: str, input_rate: int, *, media_track: bool = False) -> AgentSession:
        """`media_track`: a WebRTC call's session (`AgentSession`'s flag)."""
        profile, speaker = self.transcription.profile, self.speaker
        assert profile is not None and speaker is not None and self.llm is not None, "served once started"
        speech = SessionConfig.defaults(self.transcription.settings, input_rate)
        limits = AgentLimits(
            model_name=self.llm.name,
            speech=speech,
            context_chars=self.settings.context_chars,
            max_output_tokens=self.settings.max_output_tokens,
            answer_tokens=self.settings.answer_tokens,
            tool_preamble=self.settings.tool_preamble,
        )
        config = AgentConfig(instructions=self.settings.instructions, input_rate=input_rate)
        return AgentSession(
            session_id,
            profile,
            config,
            limits,
            vad_factory=self.transcription.vad_factory(),
            voices=lambda name: speaker.voice(name).name,
            turn_model_factory=self.transcription.turn_model_factory(),
            media_track=media_track,
        )

    def lanes(self) -> dict[str, Lane]:
        asr, llm, tts = self.transcription.worker, self.llm_worker, self.tts_worker
        assert asr is not None and llm is not None and tts is not None, "served once started"
        # The user is waiting on every stage of an agent's turn.
        return {
            ASR: Lane(asr, Priority.INTERACTIVE),
            LLM: Lane(llm, Priority.INTERACTIVE),
            TTS: Lane(tts, Priority.INTERACTIVE),
        }

    def session_ended(self, session: AgentSession) -> None:
        """Count what the session did, and drop its conversation's LLM cache."""
        for key, value in session.stats.items():
            self.usage[key] += value
        self.stages.forget(session.session_id)
        self._forget(session.session_id)

    def _forget(self, conversation: str) -> None:
        worker, llm = self.llm_worker, self.llm
        if worker is not None and llm is not None:
            self._housekeeping.later(worker, lambda: llm.forget(conversation), f"llm-forget-{conversation}")

    def usage_report(self) -> dict[str, Any]:
        counters = {key: round(self.usage[key], 3) for key in USAGE_COUNTERS}
        return {"object": "usage", "counters": counters, "pool": self.pool.snapshot()}

    # -- the service ---------------------------------------------------------------

    def model_names(self) -> list[str]:
        return [self.llm.name] if self.llm is not None else []

    def engines(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.llm is not None:
            out.append({"service": "agent", "role": "llm"} | self.llm.describe().as_dict())
        if self.speaker is not None:
            out += [{"service": "agent", "role": "tts"} | info.as_dict() for info in self.speaker.describe()]
        return out

    async def close(self) -> None:
        self._housekeeping.cancel()
        for worker in (self.llm_worker, self.tts_worker):
            if worker is not None:
                await worker.close()
        if self.llm is not None:
            close_engine("llm", self.llm.close)
        if self.speaker is not None:
            close_engine("tts", self.speaker.close)
        self.llm = self.speaker = self.llm_worker = self.tts_worker = None


def _speak(speaker: Speaker, request: SpeakRequest, cancel: CancelToken, emit: Emit[bytes]) -> None:
    speaker.synthesize(request.voice, request.text, request.speed, cancel, emit, request.rate)


@dataclass
class _Response:
    """One response's stages so far, in epoch seconds (`time.time()`)."""

    session: str
    llm_started: float
    first_token: float | None = None
    pieces: int = 0
    first_clause: str | None = None
    clause_at: float | None = None
    #: LLM pieces (about one a token) made by the first clause.
    clause_pieces: int = 0


class StageClock:
    """Times each response's stages on the engine threads; logs them at its first audio chunk.

    A TTS call does not name its session, so the response's first clause, cut from the
    LLM's text as the response (`ResponseRun`) cuts it, finds the response a call speaks for.
    """

    def __init__(self) -> None:
        #: By session: the response whose first clause is not spoken yet.
        self._waiting: dict[str, _Response] = {}
        self._lock = threading.Lock()

    def generate(self, call: Streamed[ChatRequest], stream: Generate) -> Finished:
        session = call.request.conversation
        if session is None:
            return stream(call.request, call.cancel, call.emit)
        response = _Response(session, time.time())
        cutter = ClauseCutter.spoken_answer()  # as the response cuts it (`sessions/agent/response.py`)

        def emit(piece: LLMPiece) -> None:
            response.pieces += 1
            if response.first_token is None:
                response.first_token = time.time()
            if response.first_clause is None and isinstance(piece, TextPiece):
                self._clause(response, cutter.push(piece.text))
            call.emit(piece)  # after the clause is noted: its TTS call may start at once

        finished = stream(call.request, call.cancel, emit)
        if response.first_clause is None:
            self._clause(response, [cutter.finish()])
        return finished

    def _clause(self, response: _Response, clauses: list[str]) -> None:
        # The clause as the response gives it to TTS.
        spoken = [speakable(text) for text in clauses]
        spoken = [text for text in spoken if text]
        if spoken:
            response.first_clause, response.clause_at = spoken[0], time.time()
            response.clause_pieces = response.pieces
            with self._lock:
                self._waiting[response.session] = response

    def speak(self, call: Streamed[SpeakRequest], synthesize: Synthesize) -> None:
        with self._lock:
            response = next((r for r in self._waiting.values() if r.first_clause == call.request.text), None)
            if response is not None:
                del self._waiting[response.session]
        if response is None:
            synthesize(call.request, call.cancel, call.emit)
            return
        started = time.time()
        first: list[float] = []

        def emit(pcm: bytes) -> None:
            if not first:
                first.append(time.time())
                call.emit(pcm)
                self._log(response, started, first[0])
            else:
                call.emit(pcm)

        synthesize(call.request, call.cancel, emit)

    @staticmethod
    def _log(response: _Response, tts_started: float, tts_chunk: float) -> None:
        def ms(at: float | None) -> int | None:
            return None if at is None else round(1000 * (at - response.llm_started))

        log.info(
            "agent stages",
            session=response.session,
            llm_started_at=round(response.llm_started, 4),
            llm_first_token_ms=ms(response.first_token),
            first_clause_ms=ms(response.clause_at),
            first_clause_pieces=response.clause_pieces,
            tts_started_ms=ms(tts_started),
            tts_first_chunk_ms=ms(tts_chunk),
        )

    def forget(self, session: str) -> None:
        with self._lock:
            self._waiting.pop(session, None)
