"""Where llama.cpp keeps each position of the MT sequence: a model of its KV-cache cells.

The attention tap reads `kq_soft_max`, whose columns are KV-cache *cells*, not
positions. While a sequence is only appended to and cut at its end, cell i holds
position i. Inserting source words before the kept assistant header and target
prefix (`TappedContext.insert`) breaks that: the kept cells move to higher
positions (`llama_memory_seq_add`) and the new words land in free cells after them.

`CellMap` follows llama.cpp's own rules for one unified stream (llama-kv-cache.cpp,
llama.cpp as vendored by llama-cpp-python 0.3.36):

- `seq_rm` frees the cells of the removed positions; the search head moves back
  to the first freed cell if that is lower;
- `seq_add` moves positions and sends the search head to cell 0;
- `find_slot` (non-contiguous) takes the first free cells from the head, wrapping,
  after resetting the head to 0 when it is far past the used cells; the head then
  follows the last cell taken;
- a state restored into an empty sequence takes cells the same way, in the saved
  (cell) order.

The tap checks the model against what llama.cpp computed (`AttentionTap.reach`):
a cell the model calls free never gets attention, so a drifted map fails loudly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dragoman.errors import EngineFailure

_FREE = -1


class CellMap:
    """The position each cell holds (or free), and llama.cpp's search head."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._pos = np.full(size, _FREE, np.int64)
        self.head = 0
        #: cell of each position 0..n-1 (the sequence is always contiguous in positions).
        self._cell_of: list[int] = []

    def __len__(self) -> int:
        return len(self._cell_of)

    def cells(self, positions: slice) -> npt.NDArray[np.intp]:
        """The cells holding `positions`, in position order."""
        return np.asarray(self._cell_of[positions], np.intp)

    # -- llama.cpp's operations, mirrored ---------------------------------------------------

    def append(self, count: int) -> list[int]:
        """Place `count` new positions after the last one (`llama_decode` of seq 0)."""
        start = len(self._cell_of)
        cells = self._find_slot(count)
        for i, cell in enumerate(cells):
            self._pos[cell] = start + i
        self._cell_of.extend(cells)
        return cells

    def remove_from(self, position: int) -> None:
        """Free every position from `position` on (`llama_memory_seq_rm(mem, 0, position, -1)`)."""
        if position >= len(self._cell_of):
            return
        freed = self._cell_of[position:]
        del self._cell_of[position:]
        self._pos[freed] = _FREE
        first = min(freed)
        if first < self.head:
            self.head = first

    def insert(self, at: int, count: int) -> list[int]:
        """Move positions from `at` on up by `count`, then place `count` new positions at `at`.

        llama.cpp: `seq_add(0, at, -1, count)` (head to 0), then a decode of the new
        positions (through a helper sequence, which places cells as any decode does).
        """
        if not 0 <= at <= len(self._cell_of):
            raise EngineFailure(f"cannot insert at position {at} of {len(self._cell_of)}")
        moved = self._cell_of[at:]
        self._pos[moved] += count
        self.head = 0
        cells = self._find_slot(count)
        for i, cell in enumerate(cells):
            self._pos[cell] = at + i
        self._cell_of[at:at] = cells
        return cells

    def restore(self, cells: Sequence[int]) -> None:
        """An empty sequence refilled from a state saved with this map's `cells` (position order).

        llama.cpp writes a sequence's cells in cell order and reads them back into the
        first free cells from its head, in that order.
        """
        self.remove_from(0)
        saved_order = sorted(range(len(cells)), key=lambda p: cells[p])  # positions in cell order
        placed = self._find_slot(len(cells))
        self._cell_of = [0] * len(cells)
        for position, cell in zip(saved_order, placed, strict=True):
            self._pos[cell] = position
            self._cell_of[position] = cell

    def _find_slot(self, count: int) -> list[int]:
        used = len(self._cell_of)
        head = 0 if self.head > used + 2 * count else self.head
        free = np.flatnonzero(self._pos == _FREE)
        # The first `count` free cells scanning from `head` and wrapping round.
        order = np.concatenate([free[free >= head], free[free < head]])
        if len(order) < count:
            raise EngineFailure(f"no {count} free cells in a KV cache of {self.size}")
        cells = [int(c) for c in order[:count]]
        if cells:
            self.head = cells[-1] + 1
        return cells

    # -- checks -------------------------------------------------------------------------------

    def check_reach(self, reached: npt.NDArray[np.intp], last_position: int) -> None:
        """Fail if llama.cpp attended a cell this map does not hold at or before `last_position`.

        `reached` are the cells with non-zero attention from a query at `last_position`:
        masked cells get exactly zero, so any of them outside the map's view means the
        map has drifted from llama.cpp's cells.
        """
        if len(reached) == 0:
            return
        if int(reached.max()) >= self.size:
            raise EngineFailure("attention reached a cell beyond the KV cache")
        pos = self._pos[reached]
        if ((pos == _FREE) | (pos > last_position)).any():
            raise EngineFailure("the KV-cache cell map drifted from llama.cpp's cells")
