"""A file's speech cut at pauses into engine windows, and the windows' texts joined."""

from __future__ import annotations

import itertools

import pytest

from dragoman.streaming.file_windows import (
    TimedText,
    TimedWord,
    WindowPlan,
    join_texts,
    plan_windows,
    sentences,
    speech_regions,
    timed_words,
)

RATE = 16_000
HOP = 512  # Silero's frame at 16 kHz: 32 ms
FPS = RATE / HOP


def _probs(pattern: list[tuple[float, float]]) -> list[float]:
    """(seconds, probability) runs as one probability per frame."""
    out: list[float] = []
    for seconds, p in pattern:
        out += [p] * round(seconds * FPS)
    return out


def _total(probs: list[float]) -> int:
    return len(probs) * HOP


def test_a_short_file_is_one_window_trimmed_to_its_speech_with_padding() -> None:
    probs = _probs([(1.0, 0.0), (5.0, 0.9), (2.0, 0.0)])
    windows = plan_windows(probs, HOP, _total(probs), RATE)
    assert len(windows) == 1
    start, end = windows[0].seconds(RATE)
    assert start == pytest.approx(1.0 - 0.2, abs=0.04)
    assert end == pytest.approx(6.0 + 0.2, abs=0.04)


def test_silence_only_gives_no_windows() -> None:
    probs = _probs([(10.0, 0.05)])
    assert plan_windows(probs, HOP, _total(probs), RATE) == []


def test_clicks_shorter_than_min_speech_are_dropped() -> None:
    probs = _probs([(2.0, 0.0), (0.1, 0.99), (2.0, 0.0)])
    assert speech_regions(probs, HOP, _total(probs), RATE, WindowPlan()) == []


def test_a_short_gap_does_not_end_a_region_and_hysteresis_holds_it() -> None:
    # 0.1 s below the low threshold (shorter than min_silence), then 0.5 s at 0.4 (above
    # threshold - 0.15): one region from 1 s to 4.6 s.
    probs = _probs([(1.0, 0.0), (1.0, 0.9), (0.1, 0.0), (1.0, 0.9), (0.5, 0.4), (1.0, 0.9), (2.0, 0.0)])
    regions = speech_regions(probs, HOP, _total(probs), RATE, WindowPlan(pad_s=0.0))
    assert len(regions) == 1
    assert regions[0][0] / RATE == pytest.approx(1.0, abs=0.04)
    assert regions[0][1] / RATE == pytest.approx(4.6, abs=0.04)


def test_padding_never_crosses_the_middle_of_a_gap() -> None:
    probs = _probs([(1.0, 0.9), (0.32, 0.0), (1.0, 0.9)])
    first, second = speech_regions(probs, HOP, _total(probs), RATE, WindowPlan(pad_s=0.5))
    assert first[1] <= second[0]
    assert first[1] / RATE == pytest.approx(1.16, abs=0.04)


def test_a_long_file_is_cut_at_its_pauses_into_windows_under_the_limit() -> None:
    # Sentences of 8 s with 0.6 s pauses: 100 s of audio.
    pattern: list[tuple[float, float]] = [(0.5, 0.0)]
    for _ in range(12):
        pattern += [(8.0, 0.9), (0.6, 0.02)]
    probs = _probs(pattern)
    plan = WindowPlan(max_window_s=28.0)
    windows = plan_windows(probs, HOP, _total(probs), RATE, plan)
    assert len(windows) >= 4
    for window in windows:
        assert window.end - window.start <= 28.0 * RATE
    for before, after in itertools.pairwise(windows):
        assert before.end <= after.start
        # Each cut lies in a pause: the frames at the boundary are silent.
        assert probs[before.end // HOP] < 0.5 or probs[after.start // HOP - 1] < 0.5
    # Every speech frame is inside a window.
    covered = [any(w.start <= i * HOP < w.end for w in windows) for i, p in enumerate(probs) if p >= 0.5]
    assert all(covered)
    # Each window says which speech regions it holds: in order, inside it, one per sentence.
    for window in windows:
        assert window.regions and window.regions[0][0] == window.start and window.regions[-1][1] == window.end
        assert all(a < b <= c for (a, b), (c, _) in itertools.pairwise(window.regions))
    assert sum(len(w.regions) for w in windows) == 12


def test_speech_without_pauses_is_split_at_its_least_likely_frame() -> None:
    # 40 s of speech whose only dip (a breath at 0.55) is at 20 s.
    probs = _probs([(20.0, 0.95), (0.064, 0.55), (20.0, 0.95)])
    windows = plan_windows(probs, HOP, _total(probs), RATE, WindowPlan(max_window_s=28.0))
    assert len(windows) == 2
    assert windows[0].end / RATE == pytest.approx(20.0, abs=0.1)
    assert windows[0].end == windows[1].start  # no sample lost, none repeated


def test_speech_with_no_dip_at_all_is_still_bounded() -> None:
    probs = _probs([(70.0, 0.95)])
    windows = plan_windows(probs, HOP, _total(probs), RATE, WindowPlan(max_window_s=28.0))
    assert [w.end - w.start <= 28.0 * RATE for w in windows] == [True] * len(windows)
    assert windows[0].start == 0 and windows[-1].end == _total(probs)
    assert all(a.end == b.start for a, b in itertools.pairwise(windows))


def test_join_texts_spaces_words_but_not_unspaced_scripts() -> None:
    assert join_texts([" Hello there.", "", "  General Kenobi. "]) == "Hello there. General Kenobi."
    assert join_texts(["桥下垂直净空15米。", "这是一座桥。"]) == "桥下垂直净空15米。这是一座桥。"
    assert join_texts([]) == ""


def test_timed_words_run_to_the_next_start_and_drop_punctuation() -> None:
    text = " And so my fellow Americans, ask not."
    starts = [(0, 0.0), (4, 0.52), (7, 0.84), (10, 1.18), (17, 1.54), (28, 3.1), (32, 3.74)]
    words = timed_words(text, starts, offset=10.0, end=14.5)
    assert [w.word for w in words] == ["And", "so", "my", "fellow", "Americans", "ask", "not"]
    assert words[0] == TimedWord("And", 10.0, 10.52)
    assert words[4] == TimedWord("Americans", 11.54, 13.1)  # until "ask" starts
    assert words[-1] == TimedWord("not", 13.74, 14.5)  # the last runs to the window's end


def test_timed_words_share_a_start_the_engine_gave_for_several() -> None:
    words = timed_words(" ab cdef", [(0, 1.0)], offset=0.0, end=4.0)
    assert words == [TimedWord("ab", 1.0, 2.0), TimedWord("cdef", 2.0, 4.0)]
    assert timed_words("hello", [], offset=0.0, end=1.0) == []
    assert timed_words(" , .", [(0, 0.0)], offset=0.0, end=1.0) == []


def _starts(text: str, every: float) -> list[tuple[int, float]]:
    """A start at each space-led word, `every` seconds apart."""
    marks = [i for i, ch in enumerate(text) if ch == " "]
    return [(c, round(n * every, 3)) for n, c in enumerate(marks)]


def test_sentences_are_cut_at_their_ends_and_timed_from_word_starts() -> None:
    text = " Hello there. General Kenobi! You are a bold one."
    pieces = sentences(text, _starts(text, 0.5), offset=100.0, end=105.0)
    assert [p.text for p in pieces] == [" Hello there.", " General Kenobi!", " You are a bold one."]
    assert [(p.start, p.end) for p in pieces] == [(100.0, 101.0), (101.0, 102.0), (102.0, 105.0)]


def test_a_long_sentence_is_cut_at_its_clauses_but_not_into_slivers() -> None:
    text = " one, two three four five six, seven eight nine ten eleven, twelve thirteen, end."
    pieces = sentences(text, _starts(text, 1.0), offset=0.0, end=15.0, max_s=8.0)
    assert "".join(p.text for p in pieces) == text
    assert [p.text for p in pieces] == [
        " one, two three four five six,",
        " seven eight nine ten eleven,",
        " twelve thirteen, end.",
    ]
    assert all(b.start == a.end for a, b in itertools.pairwise(pieces))


def test_without_word_starts_the_window_is_one_piece() -> None:
    assert sentences(" Hi. There.", [], offset=1.0, end=2.0) == [TimedText(" Hi. There.", 1.0, 2.0)]
    assert sentences("  ", [], offset=1.0, end=2.0) == []


def test_titles_initials_and_dotted_abbreviations_do_not_end_a_sentence() -> None:
    text = " Mr. Quilter met J. Smith in the U.S. today. Dr. Who left."
    pieces = sentences(text, _starts(text, 0.5), offset=0.0, end=8.0)
    assert [p.text for p in pieces] == [" Mr. Quilter met J. Smith in the U.S. today.", " Dr. Who left."]
