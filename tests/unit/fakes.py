"""Small deterministic stand-ins for models, for unit tests of pure code only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


class ByteTokenizer:
    """One token per UTF-8 byte: multi-byte characters span several tokens, as in byte-level BPE."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


class WordTokenizer:
    """One token per space-led word, like Whisper's ' word' tokens."""

    def encode(self, text: str) -> list[int]:
        self._words = [w for w in text.replace(" ", "\x00 ").split("\x00") if w]
        return list(range(len(self._words)))

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._words[i] for i in ids)


class EnergyVAD:
    """Speech probability from RMS energy: loud windows are speech."""

    window_samples = 512

    def __call__(self, window: NDArray[np.float32]) -> float:
        return 1.0 if float(np.sqrt(np.mean(window**2))) > 0.05 else 0.0

    def reset(self) -> None:
        pass
