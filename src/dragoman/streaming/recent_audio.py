"""The latest stretch of a stream of audio, kept as the pieces it came in.

The turn segmenter keeps two: the audio before a turn that may become its prefix padding, and
the end of an open turn that the turn model is shown.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray


class RecentAudio:
    """At least the last `limit` samples added (while that many came), and no piece that
    lies wholly before them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pieces: deque[NDArray[np.float32]] = deque()
        self._samples = 0

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def add(self, piece: NDArray[np.float32]) -> None:
        """Keep `piece` (not copied), forgetting pieces the limit no longer reaches."""
        if self.limit == 0:
            return
        self._pieces.append(piece)
        self._samples += len(piece)
        while self._samples - len(self._pieces[0]) >= self.limit:
            self._samples -= len(self._pieces.popleft())

    def latest(self) -> NDArray[np.float32]:
        """The last `limit` samples (fewer if fewer came), as one array."""
        if not self._pieces:
            return np.zeros(0, dtype=np.float32)
        held = np.concatenate(self._pieces)
        return held[len(held) - min(self.limit, len(held)) :]

    def clear(self) -> None:
        self._pieces.clear()
        self._samples = 0
