"""The interpreter's input noise reduction (`streaming/noise_reduction.py`): steady noise is cut,
speech over it is kept, strength 0 changes nothing, and the output keeps the input's length
whatever the pieces it comes in."""

from __future__ import annotations

import numpy as np
import pytest

from dragoman.streaming.noise_reduction import NoiseSuppressor

RATE = 24_000
#: The suppressor's lag: two hops of 10 ms.
LAG = 480


def db(audio: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(audio.astype(np.float64) ** 2) + 1e-20))


def noisy_speech() -> tuple[np.ndarray, np.ndarray]:
    """Four seconds of white noise (RMS 0.03), and a warbling tone in it from 1.5 to 3 s."""
    rng = np.random.default_rng(7)
    t = np.arange(4 * RATE) / RATE
    voiced = (t > 1.5) & (t < 3.0)
    speech = np.where(voiced, 0.3 * np.sin(2 * np.pi * 300 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t)), 0.0)
    noise = 0.03 * rng.standard_normal(len(t))
    return (speech + noise).astype(np.float32), speech.astype(np.float32)


def run(suppressor: NoiseSuppressor, audio: np.ndarray, piece: int) -> np.ndarray:
    out = [suppressor.process(audio[i : i + piece]) for i in range(0, len(audio), piece)]
    for given, chunk in zip(out, range(0, len(audio), piece), strict=True):
        assert len(given) == len(audio[chunk : chunk + piece]), "as many samples out as in"
    return np.concatenate(out)


def region(audio: np.ndarray, start_s: float, end_s: float) -> np.ndarray:
    return audio[int(start_s * RATE) : int(end_s * RATE)]


@pytest.mark.parametrize("kind", ["near_field", "far_field"])
def test_steady_noise_is_cut_and_speech_over_it_kept(kind: str) -> None:
    noisy, _ = noisy_speech()
    out = run(NoiseSuppressor(RATE, kind, 1.0), noisy, 4800)[LAG:]
    source = noisy[:-LAG]
    assert db(region(out, 0.8, 1.4)) < db(region(source, 0.8, 1.4)) - 8, "noise alone: cut by 8 dB or more"
    speech_change = db(region(out, 1.7, 2.9)) - db(region(source, 1.7, 2.9))
    assert abs(speech_change) < 1.0, "speech over the noise keeps its level"


def test_far_field_cuts_deeper_and_strength_scales_the_cut() -> None:
    noisy, _ = noisy_speech()
    noise_db = {}
    for kind, strength in [("near_field", 0.5), ("near_field", 1.0), ("far_field", 1.0)]:
        out = run(NoiseSuppressor(RATE, kind, strength), noisy, 4800)[LAG:]
        noise_db[kind, strength] = db(region(out, 0.8, 1.4))
    assert noise_db["near_field", 1.0] < noise_db["near_field", 0.5] - 2
    assert noise_db["far_field", 1.0] < noise_db["near_field", 1.0] - 2


def test_strength_zero_leaves_the_audio_as_it_is_twenty_ms_late() -> None:
    noisy, _ = noisy_speech()
    out = run(NoiseSuppressor(RATE, "near_field", 0.0), noisy, 3333)
    assert np.max(np.abs(out[:LAG])) < 1e-6
    np.testing.assert_allclose(out[LAG:], noisy[:-LAG], atol=1e-5)


def test_the_pieces_the_audio_comes_in_change_nothing() -> None:
    noisy, _ = noisy_speech()
    whole = run(NoiseSuppressor(RATE, "far_field", 0.7), noisy, len(noisy))
    for piece in (1, 241, 4800):
        np.testing.assert_allclose(
            run(NoiseSuppressor(RATE, "far_field", 0.7), noisy[: 6 * RATE // 10], piece),
            whole[: 6 * RATE // 10],
            atol=1e-6,
        )


def test_a_change_of_type_or_strength_keeps_the_noise_learned() -> None:
    noisy, _ = noisy_speech()
    suppressor = NoiseSuppressor(RATE, "near_field", 0.2)
    suppressor.process(noisy[:RATE])
    suppressor.set("far_field", 1.0)
    # At once, without learning the noise again: the next noise is cut as deeply as by one that had
    # been far-field all along.
    after = suppressor.process(noisy[RATE : int(1.4 * RATE)])[LAG:]
    fresh = NoiseSuppressor(RATE, "far_field", 1.0)
    fresh.process(noisy[:RATE])
    reference = fresh.process(noisy[RATE : int(1.4 * RATE)])[LAG:]
    assert abs(db(after) - db(reference)) < 3.0
    assert db(after) < db(noisy[RATE : int(1.4 * RATE)]) - 8
    with pytest.raises(ValueError):
        NoiseSuppressor(RATE, "underwater")
