"""Speech spans brought to one level before they share an engine window (audio/levels.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dragoman.audio.levels import MAX_GAIN, TARGET_RMS, even_levels


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))


def tone(level: float, n: int = 1600, seed: int = 0) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal(n)
    return (level * noise / rms(noise)).astype(np.float32)


def test_a_quiet_and_a_loud_span_come_out_at_one_level_and_the_gap_untouched() -> None:
    quiet, gap, loud = tone(0.002), tone(0.0005, seed=1), tone(0.3, seed=2)
    audio = np.concatenate([quiet, gap, loud])
    spans = [(0, 1600), (3200, 4800)]
    out = even_levels(audio, spans)
    assert rms(out[:1600]) == pytest.approx(TARGET_RMS, rel=1e-3)
    assert rms(out[3200:]) == pytest.approx(TARGET_RMS, rel=1e-3), "a loud span is lowered"
    np.testing.assert_array_equal(out[1600:3200], gap)
    assert rms(audio[:1600]) == pytest.approx(0.002, rel=1e-3), "the input is not changed"


def test_the_gain_is_bounded_and_silence_is_left_alone() -> None:
    faint = tone(TARGET_RMS / MAX_GAIN / 10)
    out = even_levels(np.concatenate([faint, np.zeros(1600, np.float32)]), [(0, 1600), (1600, 3200)])
    assert rms(out[:1600]) == pytest.approx(rms(faint) * MAX_GAIN, rel=1e-3)
    assert not out[1600:].any()


@given(
    st.lists(st.floats(-1.0, 1.0, width=32), min_size=1, max_size=400),
    st.lists(st.tuples(st.integers(-10, 410), st.integers(-10, 410)), max_size=4),
)
def test_any_spans_give_samples_in_range_and_the_same_length(
    values: list[float], spans: list[tuple[int, int]]
) -> None:
    audio = np.array(values, dtype=np.float32)
    out = even_levels(audio, spans)
    assert out.shape == audio.shape and out.dtype == np.float32
    assert np.all(np.abs(out) <= 1.0)
