"""The noise benchmark's mixing and filtering (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.noise_reduction import RATE, filtered, mixed


@pytest.mark.parametrize("kind", ["white", "pink"])
@pytest.mark.parametrize("snr_db", [10, 0])
def test_a_mix_has_the_signal_to_noise_ratio_asked_for(kind: str, snr_db: int) -> None:
    t = np.arange(3 * RATE) / RATE
    speech = (0.2 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    noisy = mixed(speech, kind, snr_db, np.random.default_rng(1))
    hiss = noisy - speech
    assert 10 * np.log10(np.mean(speech**2) / np.mean(hiss**2)) == pytest.approx(snr_db, abs=0.01)


def test_the_filter_keeps_the_length_and_the_timing() -> None:
    t = np.arange(2 * RATE) / RATE
    tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    assert filtered(tone, "off") is tone
    out = filtered(tone, "near_field")
    assert out.shape == tone.shape
    # A steady tone well above the floor passes, realigned for the filter's delay.
    steady = slice(RATE // 2, None)
    assert np.corrcoef(out[steady], tone[steady])[0, 1] > 0.99
