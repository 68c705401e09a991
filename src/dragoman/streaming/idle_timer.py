"""server_vad's idle timeout, on the audio timeline (`streaming/turns.py` runs it).

OpenAI: "Optional timeout after which a model response will be triggered automatically",
emitted as `input_audio_buffer.timeout_triggered`: "it indicates that there hasn't been any
speech detected for the configured duration", and "the empty audio will be committed to the
conversation as an input_audio item". The timer runs from the start, from the end of each turn
and from each start-over; a span of its length with no turn in it ends with that span's audio,
and the timer runs again from there. A turn that opens stops it. A caller with answers of its
own (the voice agent) holds it while it answers, and arms it again where its answer's audio
will have finished playing: OpenAI's timeout "will be applied after the last model response's
audio has finished playing".
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


class IdleTimer:
    """Positions and lengths are in samples on the segmenter's timeline; a length of 0 is off."""

    def __init__(self, length: int, start: int) -> None:
        self.length = length
        #: Where the running timer started (None: stopped).
        self.since: int | None = start if length else None
        #: The caller holds the timer (`hold`) until it arms it again.
        self.held = False
        self._audio: list[NDArray[np.float32]] = []

    def restart(self, position: int) -> None:
        self.since = position
        self._audio = []

    def stop(self) -> None:
        """A turn opened: not idle."""
        self.since = None
        self._audio = []

    def hold(self) -> None:
        """Stop the timer until `arm` (the caller is answering)."""
        self.held = True
        self.stop()

    def arm(self, position: int) -> None:
        """Run the timer from `position` (where the caller's answer will have finished
        playing); nothing when the timeout is off."""
        self.held = False
        if self.length:
            self.restart(position)

    def turn_ended(self, position: int) -> None:
        if self.length and not self.held:
            self.restart(position)

    def start_over(self, position: int) -> None:
        """A start-over (a commit, a clear) is the client's doing: the idle time starts again."""
        if self.since is not None and self.since < position:
            self.restart(position)

    def shift(self, delta: int) -> None:
        """The timeline moved by `delta` samples (the segmenter was realigned)."""
        if self.since is not None:
            self.since = max(self.since + delta, 0)

    def add(
        self, window: NDArray[np.float32], start: int, end: int, may_end: bool
    ) -> tuple[int, NDArray[np.float32]] | None:
        """Keep a window outside any turn; once the span is as long as the timeout (and it
        `may_end`: no candidate turn may still open), its start and audio, and run again."""
        begin = self.since
        if begin is None or start < begin:
            return None  # the timer starts later (the caller's answer is still playing)
        self._audio.append(window.copy())
        if not may_end or end - begin < self.length:
            return None
        audio = np.concatenate(self._audio)
        self.restart(end)
        return begin, audio
