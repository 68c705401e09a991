"""Where a long item's window is sealed (dragoman.streaming.sealing), on synthetic audio."""

from __future__ import annotations

import numpy as np

from dragoman.engines.asr.base import WordStart
from dragoman.streaming.sealing import Seal, SealPolicy, choose_seal, quietest_cut

RATE = 16_000


def spoken(layout: list[tuple[float, float]], seconds: float, noise: float = 1e-4) -> np.ndarray:
    """Tones ("words") at (start, duration) over faint noise."""
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal(int(seconds * RATE)) * noise).astype(np.float32)
    for start, duration in layout:
        a, b = int(start * RATE), int((start + duration) * RATE)
        t = np.arange(b - a) / RATE
        audio[a:b] += (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)
    return audio


def words_of(text: str, starts: list[float]) -> list[WordStart]:
    """WordStarts for each word of `text`, at `starts` (one per word)."""
    offsets = [i for i, ch in enumerate(text) if ch == " "]
    return [WordStart(chars=c, seconds=s) for c, s in zip(offsets, starts, strict=True)]


TEXT = " one two three four five six seven eight"
#: Eight words of 0.5 s; a 0.4 s pause after "four" (before "five" at 2.4 s), the rest joined.
LAYOUT = [(0.0, 0.5), (0.5, 0.5), (1.0, 0.5), (1.5, 0.5), (2.4, 0.5), (2.9, 0.5), (3.4, 0.5), (3.9, 0.5)]
STARTS = [start for start, _ in LAYOUT]
POLICY = SealPolicy(max_window_seconds=8.0, min_window_seconds=2.0)


def test_a_stable_head_is_sealed_at_the_pause() -> None:
    audio = spoken(LAYOUT, 5.6)
    seal = choose_seal(TEXT, len(TEXT), words_of(TEXT, STARTS), audio, RATE, POLICY)
    assert seal is not None
    assert TEXT[: seal.chars] == " one two three four"
    # The cut is in the silence between "four" (ends 2.0 s) and "five" (starts 2.4 s).
    assert 2.0 * RATE < seal.samples < 2.4 * RATE


def test_the_cut_follows_the_audio_when_the_alignment_is_late() -> None:
    # Cross-attention put "five" 0.1 s after its real start: the quiet stretch is found anyway.
    audio = spoken(LAYOUT, 5.6)
    starts = [s + 0.1 if i == 4 else s for i, s in enumerate(STARTS)]
    seal = choose_seal(TEXT, len(TEXT), words_of(TEXT, starts), audio, RATE, POLICY)
    assert seal is not None and 2.0 * RATE < seal.samples < 2.4 * RATE


def test_only_text_that_was_stable_is_sealed() -> None:
    audio = spoken(LAYOUT, 5.6)
    stable = len(" one two three")  # the pause after "four" lies past the stable head
    assert choose_seal(TEXT, stable, words_of(TEXT, STARTS), audio, RATE, POLICY) is None


def test_a_short_window_is_never_cut() -> None:
    audio = spoken(LAYOUT, 5.6)
    policy = SealPolicy(max_window_seconds=12.0, min_window_seconds=6.0)
    assert choose_seal(TEXT, len(TEXT), words_of(TEXT, STARTS), audio, RATE, policy) is None


def test_no_pause_no_cut_until_the_window_reaches_its_bound() -> None:
    joined = [(0.5 * i, 0.5) for i in range(8)]
    starts = [s for s, _ in joined]
    audio = spoken(joined, 5.0)
    words = words_of(TEXT, starts)
    assert choose_seal(TEXT, len(TEXT), words, audio, RATE, POLICY) is None
    # At the bound, the quietest word boundary is cut even though it is no pause.
    forced = choose_seal(TEXT, len(TEXT), words, audio, RATE, SealPolicy(4.0, 2.0))
    assert forced is not None and forced.chars in {w.chars for w in words}
    assert forced.samples <= len(audio) - RATE  # the next window keeps a second of audio


def test_the_cut_keeps_a_second_for_the_next_window() -> None:
    # The only pause is 0.5 s before the end: too late to cut there.
    layout = [(0.0, 0.5), (0.5, 0.5), (1.0, 0.5), (1.5, 0.5), (2.0, 0.5), (2.5, 0.5), (3.0, 0.5), (3.9, 0.5)]
    audio = spoken(layout, 4.4)
    words = words_of(TEXT, [s for s, _ in layout])
    assert choose_seal(TEXT, len(TEXT), words, audio, RATE, POLICY) is None


def test_silence_past_the_bound_is_dropped() -> None:
    audio = spoken([], 9.0)
    seal = choose_seal("", 0, [], audio, RATE, POLICY)
    assert seal == Seal(chars=0, samples=len(audio) - RATE)
    assert choose_seal("", 0, [], spoken([], 7.0), RATE, POLICY) is None


def test_sealing_off() -> None:
    audio = spoken(LAYOUT, 5.6)
    off = SealPolicy(max_window_seconds=0.0, min_window_seconds=0.0)
    assert not off.enabled
    assert choose_seal(TEXT, len(TEXT), words_of(TEXT, STARTS), audio, RATE, off) is None
    assert SealPolicy.for_window(10.0) == SealPolicy(max_window_seconds=10.0, min_window_seconds=5.0)


def test_quietest_cut_needs_room_for_its_run() -> None:
    levels = np.array([0.0, -40.0, -40.0, 0.0])
    found = quietest_cut(levels, 320, 0, 4, 2)
    assert found is not None and found[0] == 1 * 320 + 320 and abs(found[1] + 40.0) < 1e-3
    assert quietest_cut(levels, 320, 3, 4, 2) is None
