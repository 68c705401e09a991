"""The quiet after the last sound, cut before Moonshine's encoder (`_trim_trailing_quiet`)."""

from __future__ import annotations

import numpy as np

from dragoman.engines.asr.moonshine_ort import _QUIET_KEPT_SECONDS, _trim_trailing_quiet

RATE = 16_000
KEPT = round(_QUIET_KEPT_SECONDS * RATE)


def tone(seconds: float, level: float = 0.3) -> np.ndarray:
    t = np.arange(round(seconds * RATE)) / RATE
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def noise(seconds: float, rms: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(round(seconds * RATE)) * rms).astype(np.float32)


def test_long_silence_after_speech_is_cut_to_what_is_kept() -> None:
    speech = tone(1.0)
    trimmed = _trim_trailing_quiet(np.concatenate([speech, np.zeros(RATE, np.float32)]))
    assert len(trimmed) == len(speech) + KEPT
    np.testing.assert_array_equal(trimmed[: len(speech)], speech)


def test_a_noise_floor_counts_as_quiet() -> None:
    # -50 dBFS of room noise under the speech and after it: the speech still ends where it ends.
    audio = noise(2.0, 3e-3)
    audio[:RATE] += tone(1.0)
    assert len(_trim_trailing_quiet(audio)) == RATE + KEPT


def test_audio_that_ends_in_sound_or_short_quiet_is_left_whole() -> None:
    for audio in (tone(1.0), np.concatenate([tone(1.0), np.zeros(KEPT // 2, np.float32)])):
        assert _trim_trailing_quiet(audio) is audio


def test_audio_with_no_sound_that_stands_out_is_left_whole() -> None:
    for audio in (noise(1.5, 1e-2), np.zeros(RATE, np.float32), np.zeros(10, np.float32)):
        assert len(_trim_trailing_quiet(audio)) == len(audio)


def test_quiet_speech_is_not_taken_for_silence() -> None:
    # Speech 30 dB below the loudest part (a far speaker) is sound, and is kept.
    audio = np.concatenate([tone(0.5), tone(0.5, level=0.3 * 10 ** (-30 / 20)), np.zeros(RATE, np.float32)])
    assert len(_trim_trailing_quiet(audio)) == RATE + KEPT
