"""The model of llama.cpp's KV-cache cells that the MT attention tap reads through (no model)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.engines.mt.llama_cells import CellMap
from dragoman.errors import EngineFailure


def positions(cells: CellMap) -> list[int]:
    """The position each used cell holds, in cell order."""
    return [int(p) for p in cells._pos[cells._pos >= 0]]


def test_appends_fill_cells_in_position_order() -> None:
    cells = CellMap(64)
    cells.append(5)
    cells.append(3)
    assert list(cells.cells(slice(None))) == list(range(8))


def test_an_insert_moves_what_follows_and_takes_the_next_free_cells() -> None:
    cells = CellMap(64)
    cells.append(10)  # header 0-5, tail 6-9
    cells.insert(6, 2)  # two source tokens before the tail
    assert len(cells) == 12
    assert list(cells.cells(slice(0, 6))) == list(range(6))
    assert list(cells.cells(slice(6, 8))) == [10, 11]  # the new tokens, after the old cells
    assert list(cells.cells(slice(8, 12))) == [6, 7, 8, 9]  # the tail, moved up two positions
    assert positions(cells) == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 6, 7]


def test_removal_leaves_holes_that_the_next_tokens_fill_from_the_head() -> None:
    cells = CellMap(64)
    cells.append(10)
    cells.insert(6, 2)  # cells: 0-5 (0-5), 6-9 (8-11), 10-11 (6-7)
    cells.remove_from(9)  # frees the cells of positions 9-11: cells 7, 8, 9
    assert cells.head == 7
    placed = cells.append(4)  # positions 9-12
    assert placed == [7, 8, 9, 12]
    assert list(cells.cells(slice(None))) == [0, 1, 2, 3, 4, 5, 10, 11, 6, 7, 8, 9, 12]


def test_a_restored_sequence_is_packed_in_cell_order() -> None:
    cells = CellMap(64)
    cells.append(10)
    cells.insert(6, 2)
    saved = [int(c) for c in cells.cells(slice(None))]
    restored = CellMap(64)
    restored.append(30)  # another sequence had the context
    restored.remove_from(0)
    restored.restore(saved)
    # No holes in the saved cells, so every position keeps its cell.
    assert [int(c) for c in restored.cells(slice(None))] == saved


def test_the_search_head_goes_back_to_cell_0_when_far_past_the_used_cells() -> None:
    cells = CellMap(64)
    cells.append(40)
    cells.remove_from(2)  # head back to the first freed cell
    assert cells.head == 2
    cells.head = 30  # as llama.cpp leaves it after other operations
    assert cells.append(3) == [2, 3, 4]  # 30 > 2 used + 2 * 3: searched from cell 0


def test_a_full_cache_refuses() -> None:
    cells = CellMap(8)
    cells.append(8)
    with pytest.raises(EngineFailure):
        cells.append(1)


def test_reach_beyond_the_map_is_a_drift() -> None:
    cells = CellMap(64)
    cells.append(10)
    cells.insert(6, 2)
    # The last new token (position 7) sees positions 0-7: cells 0-5 and 10-11.
    cells.check_reach(np.array([0, 3, 5, 10, 11]), 7)
    with pytest.raises(EngineFailure):
        cells.check_reach(np.array([0, 6]), 7)  # cell 6 holds position 8
    with pytest.raises(EngineFailure):
        cells.check_reach(np.array([0, 12]), 7)  # cell 12 is free


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "remove", "insert"]), st.integers(1, 6), st.integers(0, 40)),
        max_size=30,
    )
)
def test_every_position_has_one_cell_that_holds_it(ops: list[tuple[str, int, int]]) -> None:
    cells = CellMap(256)
    for op, count, where in ops:
        length = len(cells)
        if op == "append":
            cells.append(count)
        elif op == "remove":
            cells.remove_from(min(where, length))
        elif length:
            cells.insert(1 + where % length, count)
    held = cells.cells(slice(None))
    assert len(set(held.tolist())) == len(cells)
    assert [int(cells._pos[c]) for c in held] == list(range(len(cells)))
    assert int((cells._pos >= 0).sum()) == len(cells)
