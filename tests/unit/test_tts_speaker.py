"""The speaker with a fake TTS engine: loading once, resampling across chunks, cancel, bad requests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soxr

from dragoman.config import TTSSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.registry import create_tts_engine
from dragoman.engines.tts.base import Emit, SpeechRequest, TTSCapabilities, TTSEngine
from dragoman.engines.tts.speaker import SPEED_PARAM, Speaker
from dragoman.engines.workers import CancelToken
from dragoman.errors import ConfigError, InvalidValue

RATE = 22_050


class ToneEngine:
    """A 220 Hz tone, `chunks` pieces of 0.1 s per request; records what it was asked."""

    def __init__(self, backend: str, chunks: int = 5) -> None:
        self.name = backend
        voices = {"hibari": ("heart",), "piper": ("en_US-joe-medium",)}.get(backend, ("en-us", "de"))
        self.capabilities = TTSCapabilities(RATE, ("en", "de"), voices)
        self.chunks = chunks
        self.requests: list[SpeechRequest] = []
        self.warmed = 0

    def tone(self) -> np.ndarray:
        t = np.arange(self.chunks * RATE // 10) / RATE
        return (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        self.requests.append(request)
        for piece in np.array_split(self.tone(), self.chunks):
            if cancel.cancelled:
                return
            emit(piece)

    def warm_up(self) -> None:
        self.warmed += 1

    def describe(self) -> EngineInfo:
        return EngineInfo(name=self.name, backend=self.name)

    def close(self) -> None:
        pass


class Factory:
    def __init__(self) -> None:
        self.engines: dict[str, ToneEngine] = {}

    def __call__(self, settings: TTSSettings, cache_dir: Path, backend: str) -> TTSEngine:
        assert backend not in self.engines, "a backend is built once"
        engine = self.engines[backend] = ToneEngine(backend)
        return engine


@pytest.fixture
def factory() -> Factory:
    return Factory()


@pytest.fixture
def speaker(factory: Factory, tmp_path: Path) -> Speaker:
    return Speaker(TTSSettings(), tmp_path, factory=factory)


def pcm(chunks: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(chunks), dtype="<i2").astype(np.float32) / 32768


def test_the_fake_is_a_tts_engine() -> None:
    assert isinstance(ToneEngine("hibari"), TTSEngine)


def test_backends_load_lazily_once_and_warm(speaker: Speaker, factory: Factory) -> None:
    assert factory.engines == {}
    for _ in range(2):
        speaker.synthesize("alloy", "Hello.", 1.0, CancelToken(), lambda b: None, RATE)
    assert list(factory.engines) == ["hibari"]
    assert factory.engines["hibari"].warmed == 1
    speaker.load()
    assert list(factory.engines) == ["hibari", "piper", "kokoro", "espeak-ng"]
    assert [info.name for info in speaker.describe()] == ["hibari", "piper", "kokoro", "espeak-ng"]


def test_request_carries_the_backend_voice(speaker: Speaker, factory: Factory) -> None:
    speaker.synthesize("ash", "Hi.", 1.25, CancelToken(), lambda b: None, RATE)
    speaker.synthesize("hibari", "Hallo.", 1.0, CancelToken(), lambda b: None, RATE, language="de")
    speaker.synthesize("espeak-de", "Hallo.", 1.0, CancelToken(), lambda b: None, RATE)
    assert factory.engines["piper"].requests == [SpeechRequest("Hi.", "en_US-joe-medium", 1.25, "en")]
    # German's best voice is Kokoro's Italian nicola reading it.
    assert factory.engines["kokoro"].requests == [SpeechRequest("Hallo.", "im_nicola.de", 1.0, "de")]
    assert factory.engines["espeak-ng"].requests == [SpeechRequest("Hallo.", "de", 1.0, "de")]


@pytest.mark.parametrize("rate", [16_000, 24_000, 48_000, RATE])
def test_resampled_stream_equals_resampling_the_whole(speaker: Speaker, rate: int) -> None:
    chunks: list[bytes] = []
    speaker.synthesize("hibari", "Hello.", 1.0, CancelToken(), chunks.append, rate)
    assert len(chunks) >= 5 and all(len(c) % 2 == 0 for c in chunks)
    got = pcm(chunks)
    whole = ToneEngine("hibari").tone()
    want = soxr.resample(whole, RATE, rate, quality="HQ") if rate != RATE else whole
    assert abs(len(got) - len(want)) <= 1
    n = min(len(got), len(want))
    # One int16 step of rounding; per-chunk resampling would leave filter edges at every boundary.
    assert np.max(np.abs(got[:n] - want[:n])) < 2 / 32768


def test_cancel_stops_the_stream_and_the_tail(speaker: Speaker) -> None:
    cancel = CancelToken()
    chunks: list[bytes] = []

    def emit(data: bytes) -> None:
        chunks.append(data)
        cancel.cancel()

    speaker.synthesize("hibari", "Hello.", 1.0, cancel, emit, 24_000)
    assert len(chunks) == 1


def test_cancelled_before_start_emits_nothing(speaker: Speaker) -> None:
    cancel = CancelToken()
    cancel.cancel()
    chunks: list[bytes] = []
    speaker.synthesize("hibari", "Hello.", 1.0, cancel, chunks.append, 24_000)
    assert chunks == []


def test_blank_text_speaks_nothing(speaker: Speaker, factory: Factory) -> None:
    chunks: list[bytes] = []
    speaker.synthesize("hibari", "  \n", 1.0, CancelToken(), chunks.append, 24_000)
    assert chunks == [] and factory.engines == {}


@pytest.mark.parametrize("speed", [0.2, 1.6, float("nan")])
def test_speed_outside_openai_range_is_refused(speaker: Speaker, speed: float) -> None:
    with pytest.raises(InvalidValue) as info:
        speaker.synthesize("hibari", "Hello.", speed, CancelToken(), lambda b: None, 24_000)
    assert info.value.param == SPEED_PARAM


def test_unknown_voice_is_refused_before_any_load(speaker: Speaker, factory: Factory) -> None:
    with pytest.raises(InvalidValue, match="unknown voice"):
        speaker.synthesize("no-such-voice", "Hello.", 1.0, CancelToken(), lambda b: None, 24_000)
    assert factory.engines == {}


def test_close_releases_the_engines(speaker: Speaker) -> None:
    speaker.load()
    speaker.close()
    assert speaker.describe() == []


def test_registry_refuses_an_unknown_tts_backend(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="espeak-ng, hibari, kokoro, piper"):
        create_tts_engine(TTSSettings(), tmp_path, "festival")


def test_a_remote_server_speaks_every_voice_by_the_names_clients_use(
    factory: Factory, tmp_path: Path
) -> None:
    remote = Speaker(TTSSettings(base_url="http://tts.internal:8000/v1"), tmp_path, factory=factory)
    spoken: list[bytes] = []
    remote.synthesize("alloy", "Hello.", 1.0, CancelToken(), spoken.append, 24_000)
    remote.synthesize(None, "Hello.", 1.0, CancelToken(), spoken.append, 24_000)
    remote.synthesize("joe", "Hallo.", 1.0, CancelToken(), spoken.append, 24_000, language="de")
    assert len(factory.engines) == 1, "one remote engine for every backend"
    (engine,) = factory.engines.values()
    assert [r.voice for r in engine.requests] == ["alloy", "hibari", "kokoro-de-nicola"]
    assert spoken


def test_a_voice_only_the_remote_server_knows_reaches_it(factory: Factory, tmp_path: Path) -> None:
    remote = Speaker(TTSSettings(base_url="http://tts.internal:8000/v1"), tmp_path, factory=factory)
    spoken: list[bytes] = []
    remote.synthesize("bm_george", "Hello.", 1.0, CancelToken(), spoken.append, 24_000)
    remote.synthesize("af_bella", "Ciao.", 1.0, CancelToken(), spoken.append, 24_000, language="it")
    (engine,) = factory.engines.values()
    assert [(r.voice, r.language) for r in engine.requests] == [("bm_george", "en"), ("af_bella", "it")]
    assert spoken
    with pytest.raises(InvalidValue):
        Speaker(TTSSettings(), tmp_path, factory=Factory()).voice("bm_george")
