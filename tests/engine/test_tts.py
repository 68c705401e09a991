"""The TTS backends on real text: audio, streaming, cancel, resampling and a round trip through Whisper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soxr

from dragoman.audio.silence import SILENCE_LEVEL, SilenceTrimmer
from dragoman.config import ASRSettings, TTSSettings
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.info import EngineInfo
from dragoman.engines.registry import create_asr_engine, create_tts_engine
from dragoman.engines.tts.base import Emit, FloatAudio, SpeechRequest, TTSEngine
from dragoman.engines.tts.speaker import LEAD_MS, MAX_PAUSE_MS, SENTENCE_TRAIL_MS, Speaker
from dragoman.engines.tts.voices import ESPEAK_VOICES
from dragoman.engines.workers import CancelToken
from dragoman.errors import InvalidValue, ModelUnavailable
from dragoman.tools.wer import wer

pytestmark = pytest.mark.engine

BACKENDS = {"hibari": "heart", "piper": "en_US-joe-medium", "espeak-ng": "en-us"}
RATES = {"hibari": 24_000, "piper": 22_050, "espeak-ng": 22_050}
TEXT = "The weather is lovely today, so we are going for a long walk in the park."
SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "The box was thrown beside the parked truck.",
)

#: Why a backend did not load (only espeak-ng may be missing: its library can be absent).
MISSING: dict[str, str] = {}


@pytest.fixture(scope="module")
def engines(cache_dir: Path) -> dict[str, TTSEngine]:
    loaded = {}
    for backend in BACKENDS:
        try:
            loaded[backend] = create_tts_engine(TTSSettings(), cache_dir, backend)
        except ModelUnavailable as exc:
            if backend != "espeak-ng":
                raise
            MISSING[backend] = exc.message
    return loaded


def engine(engines: dict[str, TTSEngine], backend: str) -> TTSEngine:
    if backend not in engines:
        pytest.skip(MISSING.get(backend, f"{backend} did not load"))
    return engines[backend]


def speak(
    engine: TTSEngine, text: str, voice: str, speed: float = 1.0, language: str | None = None
) -> list[FloatAudio]:
    chunks: list[FloatAudio] = []
    engine.synthesize(SpeechRequest(text, voice, speed, language), CancelToken(), chunks.append)
    return chunks


def rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))


@pytest.mark.parametrize("backend", BACKENDS)
def test_speaks_real_text(engines: dict[str, TTSEngine], backend: str) -> None:
    tts = engine(engines, backend)
    assert isinstance(tts, TTSEngine)
    assert tts.capabilities.sample_rate == RATES[backend]
    assert "en" in tts.capabilities.languages
    chunks = speak(tts, TEXT, BACKENDS[backend])
    assert chunks and all(c.dtype == np.float32 and c.ndim == 1 for c in chunks)
    audio = np.concatenate(chunks)
    assert np.all(np.abs(audio) <= 1.0)
    seconds = len(audio) / tts.capabilities.sample_rate
    assert 0.03 * len(TEXT) < seconds < 0.12 * len(TEXT), seconds
    assert rms(audio) > 0.02


@pytest.mark.parametrize("backend", BACKENDS)
def test_streams_sentence_by_sentence_and_speed_changes_pace(
    engines: dict[str, TTSEngine], backend: str
) -> None:
    tts = engine(engines, backend)
    text = " ".join(SENTENCES[:3])
    normal = speak(tts, text, BACKENDS[backend])
    assert len(normal) >= 3  # the first audio leaves before the whole text is spoken
    fast = sum(len(c) for c in speak(tts, text, BACKENDS[backend], speed=1.5))
    slow = sum(len(c) for c in speak(tts, text, BACKENDS[backend], speed=0.5))
    assert fast < sum(len(c) for c in normal) < slow


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancel_between_chunks_stops(engines: dict[str, TTSEngine], backend: str) -> None:
    tts = engine(engines, backend)
    cancel = CancelToken()
    chunks: list[FloatAudio] = []

    def emit(chunk: FloatAudio) -> None:
        chunks.append(chunk)
        cancel.cancel()

    tts.synthesize(SpeechRequest(" ".join(SENTENCES), BACKENDS[backend]), cancel, emit)
    assert len(chunks) == 1
    # The engine is fine afterwards.
    assert len(speak(tts, "Still here.", BACKENDS[backend])) >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelled_before_start_emits_nothing(engines: dict[str, TTSEngine], backend: str) -> None:
    tts = engine(engines, backend)
    cancel = CancelToken()
    cancel.cancel()
    chunks: list[FloatAudio] = []
    tts.synthesize(SpeechRequest(TEXT, BACKENDS[backend]), cancel, chunks.append)
    assert chunks == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_backend_voice_is_a_client_error(engines: dict[str, TTSEngine], backend: str) -> None:
    with pytest.raises(InvalidValue):
        speak(engine(engines, backend), TEXT, "nobody")


def test_an_emit_that_raises_surfaces_from_espeak(engines: dict[str, TTSEngine]) -> None:
    def emit(chunk: FloatAudio) -> None:
        raise RuntimeError("client gone")

    with pytest.raises(RuntimeError, match="client gone"):
        engine(engines, "espeak-ng").synthesize(SpeechRequest(TEXT, "en-us"), CancelToken(), emit)


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("de", "Guten Morgen, wie geht es dir?"),
        ("it", "Buongiorno, come stai?"),
        ("zh", "你好，今天天气很好。"),
    ],
)
def test_espeak_speaks_the_fallback_languages(
    engines: dict[str, TTSEngine], language: str, text: str
) -> None:
    tts = engine(engines, "espeak-ng")
    assert language in tts.capabilities.languages
    audio = np.concatenate(speak(tts, text, ESPEAK_VOICES[language], language=language))
    assert 0.5 < len(audio) / tts.capabilities.sample_rate < 6.0
    assert rms(audio) > 0.02


def test_every_catalog_espeak_voice_exists(engines: dict[str, TTSEngine]) -> None:
    tts = engine(engines, "espeak-ng")
    assert set(ESPEAK_VOICES.values()) <= set(tts.capabilities.voices)
    assert set(ESPEAK_VOICES) <= set(tts.capabilities.languages)


# -- the speaker: resampling to the client's rate -------------------------------------------


class Recording:
    """Delegates to a real engine and keeps what it emitted, at the engine's rate."""

    def __init__(self, inner: TTSEngine) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.audio: list[FloatAudio] = []

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        def tap(chunk: FloatAudio) -> None:
            self.audio.append(chunk)
            emit(chunk)

        self.inner.synthesize(request, cancel, tap)

    def warm_up(self) -> None:
        self.audio.clear()

    def describe(self) -> EngineInfo:
        return self.inner.describe()

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def recorded(engines: dict[str, TTSEngine], cache_dir: Path) -> tuple[Speaker, dict[str, Recording]]:
    wrapped = {backend: Recording(tts) for backend, tts in engines.items()}
    settings = TTSSettings(backends=list(wrapped))
    speaker = Speaker(settings, cache_dir, factory=lambda s, c, backend: wrapped[backend])
    return speaker, wrapped


@pytest.mark.parametrize("rate", [24_000, 16_000, 48_000])
@pytest.mark.parametrize("voice", ["hibari", "joe", "espeak-en"])
def test_speaker_resamples_to_the_requested_rate(
    recorded: tuple[Speaker, dict[str, Recording]], voice: str, rate: int
) -> None:
    speaker, wrapped = recorded
    backend = speaker.catalog.voice_for(voice).backend if voice in speaker.catalog.names else None
    if backend is None:
        pytest.skip(f"{voice}'s backend is not installed")
    wrapped[backend].audio.clear()
    chunks: list[bytes] = []
    speaker.synthesize(voice, " ".join(SENTENCES[:2]), 1.0, CancelToken(), chunks.append, rate)
    source_rate = wrapped[backend].capabilities.sample_rate
    # What the voice made, with the silence around and between its sentences bounded.
    trimmer = SilenceTrimmer(
        source_rate, lead_ms=LEAD_MS, max_pause_ms=MAX_PAUSE_MS, trail_ms=SENTENCE_TRAIL_MS
    )
    native = np.concatenate([*(trimmer.process(c) for c in wrapped[backend].audio), trimmer.finish()])
    got = np.frombuffer(b"".join(chunks), dtype="<i2").astype(np.float32) / 32768
    loud = np.flatnonzero(np.abs(got) > SILENCE_LEVEL)
    # Within the lead, plus the millisecond over which the resampler's filter spreads the onset
    # (at 16 kHz, 0.6 ms on an AVX2-only EPYC: the voice's own output differs with the kernels).
    assert loud[0] <= rate * (LEAD_MS + 1) / 1000, "the answer's first sound is not held back"
    assert abs(len(got) - len(native) * rate / source_rate) <= 2
    want = soxr.resample(native, source_rate, rate, quality="HQ")
    n = min(len(got), len(want))
    assert np.max(np.abs(got[:n] - want[:n])) < 3 / 32768  # no seams at chunk boundaries


# -- round trip: speech -> the project's Whisper -> text ------------------------------------


@pytest.fixture(scope="module")
def whisper(cache_dir: Path) -> ASREngine:
    return create_asr_engine(ASRSettings(model="whisper-base"), cache_dir)


def transcribe(asr: ASREngine, pcm16: bytes) -> str:
    audio = (np.frombuffer(pcm16, dtype="<i2") / np.float32(32768)).astype(np.float32)
    (result,) = asr.transcribe_batch([StepRequest(audio, language="en")])
    assert isinstance(result, StepResult), result
    return result.text


@pytest.mark.parametrize("voice", ["hibari", "joe"])
def test_round_trip_through_whisper(
    recorded: tuple[Speaker, dict[str, Recording]], whisper: ASREngine, voice: str
) -> None:
    speaker, _ = recorded
    hypotheses = []
    for sentence in SENTENCES:
        chunks: list[bytes] = []
        speaker.synthesize(voice, sentence, 1.0, CancelToken(), chunks.append, 16_000)
        hypotheses.append(transcribe(whisper, b"".join(chunks)))
    assert wer(SENTENCES, hypotheses) < 0.3, list(zip(SENTENCES, hypotheses, strict=True))
