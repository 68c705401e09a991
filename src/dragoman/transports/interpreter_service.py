"""The interpreter's service: OpenAI's Realtime translation sessions, composed of engines the
server already runs.

It loads no ASR or MT model of its own: its sessions' steps go to the transcription
service's batching worker (batched with every transcription and agent turn), their
drafts to the MT service's serial worker (taking turns with MT protocol v1 sessions),
and their clauses to the voice agent's TTS worker when the agent runs. Without the agent
it loads the voices once, behind a serial worker of its own.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from dragoman.config import InterpreterSettings, TTSSettings
from dragoman.engines.tts.speaker import Speaker
from dragoman.engines.workers import Priority, SerialWorker, Streamed
from dragoman.logs import get_logger
from dragoman.protocol.realtime.translation_client import (
    MODEL_NAMES,
    OPENAI_MODEL,
    OWN_MODEL,
    SESSION_SECONDS,
    known_model,
)
from dragoman.sessions.agent.jobs import ASR, TTS, SpeakRequest
from dragoman.sessions.speech.config import SessionConfig
from dragoman.sessions.translation.config import AUTO, Languages, TranslationConfig, interpreter_speech
from dragoman.sessions.translation.session import MT, TranslationSession
from dragoman.sessions.translation.speech_out import OUTPUT_RATE
from dragoman.sessions.translation.translator import MTProfile
from dragoman.streaming.turns import ServerVADConfig
from dragoman.transports.agent_service import AgentService, _speak
from dragoman.transports.lanes import Lane
from dragoman.transports.services import MTService, TranscriptionService, close_engine

log = get_logger(__name__)
#: The setting a wrongly named voice is reported under.
VOICES_SETTING = "interpreter.voices"


@dataclass(frozen=True)
class Refusal:
    """Why a translation session is not opened, on any transport."""

    code: str
    message: str
    #: Not the client's fault: it may try again later (a WebSocket's 1013, an HTTP 503).
    later: bool = False


def admission(service: InterpreterService | None, model: str | None) -> Refusal | None:
    """Whether a session of `model` may open on `service` now (None: it may)."""
    if service is None:
        return Refusal("service_unavailable", "The interpreter is not enabled on this server.")
    if not service.languages.targets:
        message = (
            "The interpreter has no target language: no MT direction from its source language has "
            "calibrated heads and a voice on this server."
        )
        return Refusal("service_unavailable", message)
    names = ", ".join(sorted(MODEL_NAMES))
    if model is None:
        return Refusal(
            "missing_model", f"Name the model (the URL's ?model=, or the session's): one of {names}."
        )
    if not known_model(model):
        return Refusal(
            "model_not_found", f"Unknown translation model {model[:60]!r}; this server serves {names}."
        )
    if service.sessions >= service.settings.max_sessions:
        message = (
            f"The server is at its limit of {service.settings.max_sessions} translation sessions; "
            "try again later."
        )
        return Refusal("session_limit_reached", message, later=True)
    return None


class InterpreterService:
    name = "interpreter"

    def __init__(
        self,
        settings: InterpreterSettings,
        tts: TTSSettings,
        cache_dir: Path,
        listening: TranscriptionService,
        mt: MTService,
        agent: AgentService | None,
    ) -> None:
        self.settings = settings
        self.tts_settings = tts
        self.cache_dir = cache_dir
        self.listening = listening
        self.mt = mt
        self.agent = agent
        self.speaker: Speaker | None = None
        self.tts_worker: SerialWorker[Streamed[SpeakRequest], None] | None = None
        #: The voices and their worker are this service's own (no agent to share them).
        self._owns_voices = False
        self.languages = Languages(settings.source_language, ())
        self.sessions = 0

    async def start(self) -> None:
        began = time.perf_counter()
        agent = self.agent
        if agent is not None and agent.speaker is not None and agent.tts_worker is not None:
            self.speaker, self.tts_worker = agent.speaker, agent.tts_worker
            self.speaker.catalog.check_chosen(self.settings.voices, VOICES_SETTING)
        else:
            speaker = Speaker(self.tts_settings, self.cache_dir)
            # A voice named wrongly stops the server before any voice is loaded.
            speaker.catalog.check_chosen(self.settings.voices, VOICES_SETTING)
            try:
                await asyncio.to_thread(speaker.load)
            except BaseException:
                speaker.close()
                raise
            self.speaker, self._owns_voices = speaker, True
            self.tts_worker = SerialWorker(functools.partial(_tts_call, speaker), name="tts")
        source = self.settings.source_language
        profile = self.listening.profile
        heard = profile.capabilities.languages if profile is not None else frozenset()
        if source == AUTO and heard == frozenset({"en"}):
            # An English-only speech model detects no language: its speakers speak English.
            log.warning("interpreter: the transcription model hears English only; source language en")
            source = "en"
        languages = Languages.of(self.mt.directions, source)
        spoken = tuple(lang for lang in languages.targets if self._speaks(lang))
        self.languages = replace(languages, targets=spoken)
        log.info(
            "interpreter ready",
            sources=list(self.languages.sources),
            languages=list(self.languages.targets),
            voices={lang: self.voice(lang) for lang in self.languages.targets},
            shared_voices=not self._owns_voices,
            seconds=round(time.perf_counter() - began, 2),
        )

    def _speaks(self, language: str) -> bool:
        try:
            self.voice(language)
        except Exception:
            return False
        return True

    def voice(self, language: str) -> str:
        """The voice of `language`: the one `interpreter.voices` names where it is loaded, else the
        best loaded, by the round trip through Whisper (`VoiceCatalog.for_language`);
        InvalidValue when no loaded voice speaks it."""
        speaker = self.speaker
        assert speaker is not None, "served once started"
        return speaker.catalog.for_language(language, self.settings.voices).name

    # -- sessions ------------------------------------------------------------------

    def new_session(self, model: str, media_track: bool = False) -> TranslationSession:
        profile, engine = self.listening.profile, self.mt.engine
        assert profile is not None and engine is not None, "served once started"
        speech = replace(
            interpreter_speech(SessionConfig.defaults(self.listening.settings, OUTPUT_RATE)),
            # Left open ("auto"), each segment's language is detected by the speech model.
            language=None if self.languages.source == AUTO else self.languages.source,
            detect_among=self.languages.sources,
            turn_detection=ServerVADConfig(),
        )
        mt = MTProfile(
            engine_name=engine.name,
            directions=tuple(self.mt.directions),
            decode=engine.decode,
            default_preset=self.mt.default_preset,
            presets=self.mt.presets,
            max_utterance_words=self.mt.max_utterance_words,
        )
        language = self.settings.language
        if language not in self.languages.targets and self.languages.targets:
            language = self.languages.targets[0]
        return TranslationSession(
            "sess_" + uuid.uuid4().hex[:20],
            model=model,
            model_names=MODEL_NAMES,
            expires_at=int(time.time()) + SESSION_SECONDS,
            config=TranslationConfig(language),
            languages=self.languages,
            asr=profile,
            speech=speech,
            mt=mt,
            voices=self.voice,
            vad_factory=self.listening.vad_factory(),
            media_track=media_track,
        )

    def lanes(self) -> dict[str, Lane]:
        asr, mt, tts = self.listening.worker, self.mt.worker, self.tts_worker
        assert asr is not None and mt is not None and tts is not None, "served once started"
        # A listener waits on every stage: the speaker's words, their translation, its speech.
        return {
            ASR: Lane(asr, Priority.STREAMING),
            MT: Lane(mt, Priority.INTERACTIVE),
            TTS: Lane(tts, Priority.INTERACTIVE),
        }

    def session_ended(self, session: TranslationSession) -> None:
        """Drop the session's MT caches, after the work that waits for the engine."""
        session.close()
        for key in session.translator.cache_keys:
            self.mt.forget(key)
        # Where the first translated text of each segment waited (`sessions/translation/timeline.py`).
        log.debug(
            "translation session timeline",
            session=session.session_id,
            asr_steps_coalesced=session.steps_coalesced,
            mt=session.translator.stats,
            **session.timeline.summary(),
        )

    # -- the service ---------------------------------------------------------------

    def model_names(self) -> list[str]:
        return [OPENAI_MODEL, OWN_MODEL]

    async def close(self) -> None:
        if self._owns_voices:
            if self.tts_worker is not None:
                await self.tts_worker.close()
            if self.speaker is not None:
                close_engine("tts", self.speaker.close)
        self.speaker = self.tts_worker = None


def _tts_call(speaker: Speaker, call: Streamed[SpeakRequest]) -> None:
    _speak(speaker, call.request, call.cancel, call.emit)
