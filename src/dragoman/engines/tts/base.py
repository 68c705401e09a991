"""The TTS engine interface.

An engine turns one clause or sentence into mono float32 audio at its native rate and
hands it over in chunks as they are made (per sentence or phrase where the backend can),
so the first audio reaches the client before the whole text is spoken. Engines run on a
worker thread and check the request's `CancelToken` between chunks: a client that
interrupts the reply stops the synthesis at the next chunk.

Voices are the backend's own names here; the names clients use (OpenAI's included) are
mapped onto them by `voices.py`, and `speaker.py` resamples and encodes for the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dragoman.engines.info import EngineInfo
from dragoman.engines.workers import CancelToken
from dragoman.errors import InvalidValue

FloatAudio = NDArray[np.float32]
#: Receives each chunk of audio as the engine makes it (on the worker thread).
Emit = Callable[[FloatAudio], None]

#: OpenAI's range for `speed`; 1.0 is the voice's normal pace.
MIN_SPEED = 0.25
MAX_SPEED = 1.5


@dataclass(frozen=True)
class TTSCapabilities:
    #: Native output rate.
    sample_rate: int
    #: ISO 639-1 codes it speaks.
    languages: tuple[str, ...]
    #: Its own voice names.
    voices: tuple[str, ...]


@dataclass(frozen=True)
class SpeechRequest:
    #: One clause or sentence.
    text: str
    #: The backend's own voice name.
    voice: str
    #: 0.25..1.5 (OpenAI's range); 1.0 normal.
    speed: float = 1.0
    language: str | None = None


@runtime_checkable
class TTSEngine(Protocol):
    name: str
    capabilities: TTSCapabilities

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        """Blocking; runs on the worker thread. Emits mono float32 chunks in [-1, 1] at
        capabilities.sample_rate as they are made (per sentence/phrase where the backend can),
        checking `cancel` between chunks."""
        ...

    def warm_up(self) -> None:
        """One real call at load, so the first request does not pay for lazy set-up."""
        ...

    def describe(self) -> EngineInfo:
        """Name, backend, device and compute type, for /health and the start-up log."""
        ...

    def close(self) -> None:
        """Release the model."""
        ...


def check_request(request: SpeechRequest, capabilities: TTSCapabilities, backend: str) -> None:
    """Refuse a voice or language the engine does not have (the client named it)."""
    if request.voice not in capabilities.voices:
        raise InvalidValue(
            f"the {backend} TTS backend has no voice {request.voice[:40]!r}; "
            f"its voices: {', '.join(capabilities.voices[:40])}",
            param="session.audio.output.voice",
        )
    if request.language is not None and request.language not in capabilities.languages:
        raise InvalidValue(
            f"the {backend} TTS backend does not speak {request.language[:20]!r}", param="language"
        )


def engine_threads(threads: int) -> int:
    """Settings' `threads` (0: the server's share, resolved before the engine is built) -> intra-op threads.

    Outside the server 0 means one thread: both neural voices run far faster than real time on
    one core, and spare threads would spin against the ASR engine's.
    """
    return threads if threads > 0 else 1


def as_chunk(audio: NDArray[np.floating]) -> FloatAudio:
    """A model's output as the contract's chunk: 1-D contiguous float32, clipped to [-1, 1]."""
    return np.clip(np.ascontiguousarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
