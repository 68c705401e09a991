"""Trimming the silence a TTS voice puts around each sentence, as its audio streams.

A voice such as hibari frames every sentence with about 300 ms of silence before it and
400 ms after. Spoken clause by clause, that silence is heard over and over: the first
300 ms delay the answer's first sound, and a clause boundary in the middle of a
sentence becomes a 700 ms gap. `SilenceTrimmer` keeps a short margin before the first
sound (`lead_ms`), caps each pause between sounds (`max_pause_ms`), and keeps at most
`trail_ms` after the last sound. Chunks stream through it in order: silence after the
latest sound is held back until more sound comes (then up to `max_pause_ms` of it is
let through) or the stream ends (then up to `trail_ms`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatAudio = NDArray[np.float32]

#: Below about -60 dBFS a sample is silence: hibari's padding is exact zeros and piper's a
#: faint noise floor, while even quiet speech sounds are some 20 dB above it.
SILENCE_LEVEL = 0.001


class SilenceTrimmer:
    """One stream's audio in (`process`), the same audio with its silences bounded out."""

    def __init__(
        self,
        rate: int,
        *,
        lead_ms: float,
        max_pause_ms: float,
        trail_ms: float,
        level: float = SILENCE_LEVEL,
    ) -> None:
        self._lead = int(rate * lead_ms / 1000)
        self._max_pause = int(rate * max_pause_ms / 1000)
        self._trail = int(rate * trail_ms / 1000)
        self._level = level
        self._sounded = False
        #: The silence since the latest sound (before the first: the last `lead` samples of it).
        self._held: FloatAudio = np.zeros(0, dtype=np.float32)

    def process(self, chunk: FloatAudio) -> FloatAudio:
        """What of `chunk` (and of the silence held before it) can be played now."""
        loud = np.flatnonzero(np.abs(chunk) > self._level)
        if not len(loud):
            self._held = np.concatenate([self._held, chunk])
            if not self._sounded:
                self._held = self._held[len(self._held) - min(len(self._held), self._lead) :]
            return chunk[:0]
        first, last = int(loud[0]), int(loud[-1]) + 1
        if self._sounded:
            pause = np.concatenate([self._held, chunk[:first]])[: self._max_pause]
        else:
            pause = np.concatenate([self._held, chunk[:first]])
            pause = pause[len(pause) - min(len(pause), self._lead) :]
            self._sounded = True
        self._held = chunk[last:]
        return np.concatenate([pause, chunk[first:last]])

    def finish(self) -> FloatAudio:
        """The end of the stream: at most `trail_ms` of the silence after the last sound."""
        tail, self._held = self._held[: self._trail] if self._sounded else self._held[:0], self._held[:0]
        return tail
