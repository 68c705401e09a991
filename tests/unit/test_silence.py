"""SilenceTrimmer: the speech passes whole; the silence around and between it is bounded."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dragoman.audio.silence import SilenceTrimmer

RATE = 1000  # one sample a millisecond keeps the arithmetic readable


def tone(ms: int) -> np.ndarray:
    return np.full(ms, 0.5, dtype=np.float32)


def hush(ms: int) -> np.ndarray:
    return np.zeros(ms, dtype=np.float32)


def trimmer() -> SilenceTrimmer:
    return SilenceTrimmer(RATE, lead_ms=20, max_pause_ms=300, trail_ms=100)


def run(chunks: list[np.ndarray]) -> np.ndarray:
    trim = trimmer()
    out = [trim.process(chunk) for chunk in chunks]
    return np.concatenate([*out, trim.finish()])


def test_a_sentence_framed_in_silence_keeps_short_margins() -> None:
    out = run([np.concatenate([hush(300), tone(500), hush(400)])])
    assert len(out) == 20 + 500 + 100
    assert np.all(out[20:520] == 0.5) and not np.any(out[:20]) and not np.any(out[520:])


def test_the_first_sound_is_not_held_back_by_the_lead_in() -> None:
    trim = trimmer()
    assert len(trim.process(hush(300))) == 0
    first = trim.process(np.concatenate([hush(5), tone(50)]))
    assert len(first) == 20 + 50


def test_a_pause_between_sentences_is_capped_and_a_short_one_kept() -> None:
    out = run([tone(100), hush(700), tone(100), hush(50), tone(100)])
    assert len(out) == 100 + 300 + 100 + 50 + 100


def test_silence_is_held_until_more_sound_or_the_end() -> None:
    trim = trimmer()
    assert len(trim.process(np.concatenate([tone(100), hush(80)]))) == 100
    assert len(trim.process(hush(80))) == 0
    assert len(trim.finish()) == 100


def test_all_silence_gives_nothing() -> None:
    assert len(run([hush(500), hush(500)])) == 0


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 900)), max_size=12))
def test_every_sound_sample_passes_in_order(parts: list[tuple[bool, int]]) -> None:
    chunks = [tone(ms) if loud else hush(ms) for loud, ms in parts]
    out = run(chunks)
    sound = sum(ms for loud, ms in parts if loud)
    assert int(np.count_nonzero(out)) == sound
    assert len(out) <= sound + 20 + 300 * len(parts) + 100
