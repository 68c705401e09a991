"""The TTS backends of one server, shared by every session: a voice name and text in, PCM16 bytes out.

`Speaker` owns the backends the voice catalog needs and loads each once: all of them at
start-up with `load()` (each warmed by one real call), or a backend on first use. A
request's audio leaves the engine at the backend's rate and is resampled to the rate the
client asked for with one soxr stream per request, whose filter state runs across chunks,
so chunk boundaries leave no clicks; each piece is emitted as int16 little-endian bytes,
ready for base64. Nothing here knows about sessions or the wire protocol.

Each request is one clause of an answer, and the silence the voice frames it with is
bounded first (`audio/silence.py`): the answer's first sound is not delayed by the
voice's lead-in, and the clauses of one sentence join with a breath, not a gap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dragoman.audio.pcm import float_to_pcm16
from dragoman.audio.resample import StreamResampler
from dragoman.audio.silence import SilenceTrimmer
from dragoman.config import TTSSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.registry import create_tts_engine
from dragoman.engines.tts.base import MAX_SPEED, MIN_SPEED, FloatAudio, SpeechRequest, TTSEngine
from dragoman.engines.tts.voices import REMOTE, Voice, VoiceCatalog
from dragoman.engines.workers import CancelToken
from dragoman.errors import InvalidValue
from dragoman.logs import get_logger

log = get_logger(__name__)

SPEED_PARAM = "session.audio.output.speed"

#: The silence kept before a clause's first sound, within it, and after it: after a sentence
#: end the pause a listener expects, after a clause cut mid-sentence a breath.
LEAD_MS = 20.0
MAX_PAUSE_MS = 350.0
SENTENCE_TRAIL_MS = 300.0
CLAUSE_TRAIL_MS = 100.0
_SENTENCE_END = tuple(".!?…。！？")

#: create(settings, cache_dir, backend) -> TTSEngine; the registry's, or a test's.
EngineFactory = Callable[[TTSSettings, Path, str], TTSEngine]
#: Receives PCM16 little-endian mono bytes at the requested rate.
EmitBytes = Callable[[bytes], None]


class Speaker:
    """Loads the catalog's backends once and speaks with them; safe to call from several threads."""

    def __init__(
        self,
        settings: TTSSettings,
        cache_dir: Path,
        *,
        factory: EngineFactory = create_tts_engine,
    ) -> None:
        self.settings = settings
        self.catalog = VoiceCatalog(settings.backends, settings.voice, remote=bool(settings.base_url))
        self._cache_dir = Path(cache_dir)
        self._factory = factory
        self._engines: dict[str, TTSEngine] = {}
        # One lock for loading: a backend is built once even when two sessions ask at once.
        self._lock = threading.Lock()

    def load(self) -> None:
        """Build and warm every backend the catalog uses (start-up; blocking)."""
        for backend in self.catalog.backends:
            self.engine(backend)

    def engine(self, backend: str) -> TTSEngine:
        """The loaded engine of `backend`, built and warmed on first use (with `base_url`, the one
        remote engine speaks for every backend)."""
        backend = REMOTE if self.settings.base_url else backend
        engine = self._engines.get(backend)
        if engine is not None:  # loaded: no need to wait behind another backend's load
            return engine
        with self._lock:
            engine = self._engines.get(backend)
            if engine is None:
                engine = self._factory(self.settings, self._cache_dir, backend)
                engine.warm_up()
                self._engines[backend] = engine
                log.info("tts engine ready", backend=backend, rate=engine.capabilities.sample_rate)
            return engine

    def voice(self, name: str | None, language: str | None = None) -> Voice:
        """The catalog's voice for a client's name (InvalidValue for an unknown one)."""
        return self.catalog.voice_for(name, language)

    def synthesize(
        self,
        voice_name: str | None,
        text: str,
        speed: float,
        cancel: CancelToken,
        emit: EmitBytes,
        rate: int,
        *,
        language: str | None = None,
    ) -> None:
        """Speak `text` with the named voice (None: the default), emitting PCM16 bytes at `rate`.

        Blocking: run it on a worker thread. Stops at the engine's next chunk once `cancel`
        is set, and then emits nothing more. InvalidValue for an unknown voice, a language
        no voice speaks, or a speed outside 0.25..1.5.
        """
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise InvalidValue(
                f"speed must be between {MIN_SPEED} and {MAX_SPEED}, not {speed}", param=SPEED_PARAM
            )
        voice = self.voice(voice_name, language)
        if not text.strip():
            return
        engine = self.engine(voice.backend)
        engine_rate = engine.capabilities.sample_rate
        resampler = StreamResampler(engine_rate, rate)
        trail = SENTENCE_TRAIL_MS if text.rstrip().endswith(_SENTENCE_END) else CLAUSE_TRAIL_MS
        trimmer = SilenceTrimmer(engine_rate, lead_ms=LEAD_MS, max_pause_ms=MAX_PAUSE_MS, trail_ms=trail)

        def on_audio(chunk: FloatAudio) -> None:
            if cancel.cancelled:
                return
            out = resampler.process(trimmer.process(chunk))
            if len(out):
                emit(float_to_pcm16(out))

        # A remote server takes the names clients use: the client's own when it picked this voice.
        spoken = voice.backend_voice
        if self.settings.base_url:
            spoken = voice_name if voice_name and self.voice(voice_name) == voice else voice.name
        request = SpeechRequest(text=text, voice=spoken, speed=speed, language=voice.language)
        engine.synthesize(request, cancel, on_audio)
        if not cancel.cancelled:
            tail = np.concatenate([resampler.process(trimmer.finish()), resampler.drain()])
            if len(tail):
                emit(float_to_pcm16(tail))

    def describe(self) -> list[EngineInfo]:
        """The loaded engines, for /health and the start-up log."""
        with self._lock:
            return [engine.describe() for engine in self._engines.values()]

    def close(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()
