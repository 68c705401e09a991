"""The end-of-turn model interface.

semantic_vad (OpenAI) "uses a turn detection model (in conjunction with VAD) to semantically
estimate whether the user has finished speaking". A `TurnModel` is that model: given the
audio of the turn so far, it says how likely it is that the user is done. The segmenter
(`streaming/turns.py`) asks it once at each pause and decides from the answer how long to
wait; the model itself keeps no state between calls, so one instance serves every session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from dragoman.audio.rates import SAMPLE_RATE


@dataclass(frozen=True)
class TurnCapabilities:
    #: The model sees at most this much of the turn, its end; earlier audio is ignored.
    max_audio_seconds: float
    sample_rate: int = SAMPLE_RATE


class TurnModel(Protocol):
    """A stateless end-of-turn classifier, safe to call from several threads."""

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> TurnCapabilities: ...

    def completion_probability(self, audio: NDArray[np.float32]) -> float:
        """P(turn complete) of a turn's mono float32 audio at `capabilities.sample_rate`.

        The audio should end where the pause being judged is (its silence included); only
        its last `max_audio_seconds` count, and shorter audio is fine.
        """
        ...
