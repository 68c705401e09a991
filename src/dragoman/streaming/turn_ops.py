"""What the turn segmenter (`streaming/turns.py`) says, in timeline order, and the turn model
it may ask."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

#: P(the turn is complete) of a turn's 16 kHz audio: the turn model of semantic_vad.
TurnCompletion: TypeAlias = Callable[[NDArray[np.float32]], float]


@dataclass(frozen=True)
class SpeechStarted:
    audio_start_ms: int


@dataclass(frozen=True, eq=False)
class TurnAudio:
    """The next samples of the current turn (a fresh array, owned by the receiver)."""

    samples: NDArray[np.float32]


@dataclass(frozen=True)
class SpeechStopped:
    audio_end_ms: int


@dataclass(frozen=True)
class Paused:
    """With pauses on (the voice agent's early start): a silence began in the open
    turn, which ends it unless speech comes back first. `audio_end_ms`: the audio so far."""

    audio_end_ms: int


@dataclass(frozen=True)
class Resumed:
    """Speech came back after a `Paused`: the turn goes on."""


@dataclass(frozen=True, eq=False)
class IdleTimeout:
    """No turn for `idle_timeout_ms`: the span [audio_start_ms, audio_end_ms) and its audio
    (a fresh array, owned by the receiver)."""

    audio_start_ms: int
    audio_end_ms: int
    samples: NDArray[np.float32]


TurnOp: TypeAlias = SpeechStarted | TurnAudio | SpeechStopped | Paused | Resumed | IdleTimeout
