"""Streaming resampling to 16 kHz: chunked equals one-shot, lengths add up, pass-through."""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from dragoman.audio.rates import SUPPORTED_RATES
from dragoman.audio.resample import StreamResampler


def _signal(rate: int, seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    tone = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1234.5 * t)
    return (tone + 0.05 * rng.standard_normal(len(t))).astype(np.float32)


def _random_pieces(audio: np.ndarray, seed: int, most: int = 3000) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    cuts, at = [], 0
    while True:
        at += int(rng.integers(0, most))  # zero-length pieces included
        if at >= len(audio):
            break
        cuts.append(at)
    return np.split(audio, cuts)


def test_24k_streamed_in_random_pieces_equals_one_shot() -> None:
    audio = _signal(24000, 3.0)
    resampler = StreamResampler(24000)
    out = [resampler.process(piece) for piece in _random_pieces(audio, seed=1)]
    out.append(resampler.drain())
    streamed = np.concatenate(out)
    whole = soxr.resample(audio, 24000, 16000)
    assert streamed.dtype == np.float32
    assert len(streamed) == len(whole) == 48000
    np.testing.assert_allclose(streamed, whole, atol=1e-5)


@pytest.mark.parametrize("rate", SUPPORTED_RATES)
def test_lengths_add_up_after_drain(rate: int) -> None:
    audio = _signal(rate, 1.37, seed=rate)
    resampler = StreamResampler(rate)
    total = sum(len(resampler.process(piece)) for piece in _random_pieces(audio, seed=rate, most=900))
    assert total == resampler.out_samples
    assert resampler.held == len(audio) * 16000 // rate - total
    total += len(resampler.drain())
    expected = len(audio) * 16000 / rate
    # A finished stream is rounded up to a whole sample.
    assert total == int(np.ceil(expected))
    assert resampler.in_samples == len(audio)
    assert resampler.out_samples == total
    assert resampler.held == 0


def test_drain_starts_over_fresh() -> None:
    audio = _signal(24000, 0.5)
    resampler = StreamResampler(24000)
    first = np.concatenate([resampler.process(audio), resampler.drain()])
    second = np.concatenate([resampler.process(audio), resampler.drain()])
    np.testing.assert_array_equal(first, second)
    assert resampler.in_samples == 2 * len(audio)
    assert resampler.out_samples == len(first) + len(second)


def test_reset_drops_what_is_held() -> None:
    audio = _signal(24000, 0.5)
    resampler = StreamResampler(24000)
    resampler.process(audio)
    assert resampler.held > 0
    resampler.reset()
    assert resampler.held == 0
    assert len(resampler.drain()) == 0
    fresh = np.concatenate([resampler.process(audio), resampler.drain()])
    np.testing.assert_allclose(fresh, soxr.resample(audio, 24000, 16000), atol=1e-5)


def test_16k_is_a_pass_through() -> None:
    audio = _signal(16000, 0.25)
    resampler = StreamResampler(16000)
    assert resampler.passthrough
    out = [resampler.process(piece) for piece in _random_pieces(audio, seed=3, most=700)]
    np.testing.assert_array_equal(np.concatenate(out), audio)
    assert len(resampler.drain()) == 0
    assert resampler.in_samples == resampler.out_samples == len(audio)
    # float64 input comes out as float32
    assert resampler.process(audio.astype(np.float64)).dtype == np.float32


def test_rejects_bad_rates_and_shapes() -> None:
    with pytest.raises(ValueError):
        StreamResampler(0)
    with pytest.raises(ValueError):
        StreamResampler(24000).process(np.zeros((2, 10), dtype=np.float32))
