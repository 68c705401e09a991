"""The history window: it grows so that each utterance's prompt extends the previous one."""

from __future__ import annotations

import itertools

import pytest

from dragoman.sessions.mt.utterance import history_window
from tests.unit.test_mt_session import Driver


def test_the_window_grows_to_twice_the_pairs_then_falls_back() -> None:
    assert [history_window(n, 2) for n in range(12)] == [0, 1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2]
    assert [history_window(n, 1) for n in range(7)] == [0, 1, 2, 1, 2, 1, 2]
    assert all(history_window(n, 0) == 0 for n in range(5))


@pytest.mark.parametrize("pairs", [1, 2, 3, 4])
def test_never_fewer_than_the_pairs_asked_for_nor_more_than_twice(pairs: int) -> None:
    for total in range(60):
        window = history_window(total, pairs)
        assert min(total, pairs) <= window <= 2 * pairs
        nxt = history_window(total + 1, pairs)
        # Either the window took the new pair and kept all it had (the prompt is extended) ...
        # ... or it fell back to `pairs` (the history is recomputed), at most every pairs + 1.
        assert nxt == window + 1 or nxt == pairs


def test_each_utterances_history_extends_the_previous_ones() -> None:
    d = Driver()  # preset "plain": history_pairs 2
    sentences = [
        ["Hello", "world,"],
        ["the", "house"],
        ["is", "red."],
        ["how", "are", "you?"],
        ["big", "street"],
    ]
    histories = []
    for utterance, words in enumerate(sentences):
        d.update(words, utterance=utterance, final=True)
        d.run()
        histories.append(d.engine.requests[-1].history)
    assert [len(h) for h in histories] == [0, 1, 2, 3, 4]
    for before, after in itertools.pairwise(histories):
        assert after[: len(before)] == before
    assert histories[-1][-1] == ("how are you?", "wie geht es?")
