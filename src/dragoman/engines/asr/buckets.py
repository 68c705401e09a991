"""Length buckets: the windows an engine encodes, so that short audio does not pad to long.

An encoder pass pads every request of a batch to one window, so a batch of four 2 s
steps and four 10 s steps would encode 80 s of audio where 48 s do. Each request's
window is instead the shortest of a fixed grid that holds its audio (and the silence
after it), and one engine call makes one encoder pass per grid window: short steps
batch with short ones, long with long.

Because a request's window depends on its own audio only, never on what it was
batched with, a step's hypothesis is the same under any load: batched or alone.
The grid is about 25 % apart, so a request pads by at most that much.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The windows encoded, in seconds (Whisper's input is 30 s at most).
GRID_SECONDS = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 15.0, 18.0, 22.0, 26.0, 30.0)


def grid_window(seconds: float) -> float:
    """The shortest grid window that holds `seconds` (the longest, past the grid)."""
    return next((g for g in GRID_SECONDS if seconds <= g + 1e-9), GRID_SECONDS[-1])


def length_buckets(seconds: Sequence[float]) -> list[list[int]]:
    """Indices of `seconds` grouped by their grid window, shortest window first."""
    buckets: dict[float, list[int]] = {}
    for i, s in enumerate(seconds):
        buckets.setdefault(grid_window(s), []).append(i)
    return [buckets[w] for w in sorted(buckets)]
