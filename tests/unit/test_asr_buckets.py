"""Length buckets of an ASR engine call (dragoman.engines.asr.buckets)."""

from __future__ import annotations

import itertools

from dragoman.engines.asr.buckets import GRID_SECONDS, grid_window, length_buckets


def test_short_steps_do_not_pad_to_long_ones() -> None:
    seconds = [11.0, 3.0, 9.5, 3.5, 11.0, 2.5]
    assert [[seconds[i] for i in b] for b in length_buckets(seconds)] == [
        [3.0, 2.5],
        [3.5],
        [9.5],
        [11.0, 11.0],
    ]


def test_a_window_depends_on_its_own_audio_only() -> None:
    assert grid_window(0.3) == 2.0
    assert grid_window(2.0) == 2.0 and grid_window(2.01) == 3.0
    assert grid_window(29.9) == 30.0 and grid_window(31.0) == 30.0
    # About 25 % apart at most past the shortest window: the padding is bounded.
    assert all(b / a <= 1.34 for a, b in itertools.pairwise(GRID_SECONDS[3:]))


def test_every_request_is_in_exactly_one_bucket() -> None:
    seconds = [0.5 * ((7 * i) % 19) + 0.5 for i in range(24)]
    buckets = length_buckets(seconds)
    assert sorted(i for b in buckets for i in b) == list(range(24))
    windows = [grid_window(seconds[b[0]]) for b in buckets]
    assert windows == sorted(set(windows))
    assert all(grid_window(seconds[i]) == w for b, w in zip(buckets, windows, strict=True) for i in b)
    assert length_buckets([]) == []
