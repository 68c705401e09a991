"""The history window: it grows so that each utterance's prompt extends the previous one."""

from __future__ import annotations

import itertools

import pytest

from dragoman.engines.mt.base import DraftMode
from dragoman.errors import EngineFailure
from dragoman.sessions.mt.events import Error, JobKind
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


def test_a_chinese_utterance_enters_the_history_as_running_text() -> None:
    # The speech front hands Chinese over a character a word; the prompt's source reads
    # them without spaces, and so must the history turn they become.
    d = Driver(directions=("zh-en",), source_lang="zh", target_lang="en")
    talk(d, [["你", "好"], ["世", "界"]])
    assert d.engine.requests[-1].history[-1][0] == "你好"


SENTENCES = [["Hello", "world,"], ["the", "house"], ["is", "red."], ["how", "are", "you?"], ["big", "street"]]


def talk(d: Driver, sentences: list[list[str]]) -> None:
    for utterance, words in enumerate(sentences):
        d.update(words, utterance=utterance, final=True)
        d.run()


def test_in_the_pause_after_each_utterance_the_next_prompt_head_is_prefilled() -> None:
    d = Driver()  # history_pairs 2: the window grows to 4 pairs, then falls back to 2
    talk(d, SENTENCES[:4])
    assert [len(p.history) for p in d.engine.prefills] == [1, 2, 3, 4], (
        "after each utterance, the head of the next"
    )
    d.update(SENTENCES[4], utterance=4, final=True)
    d.run()
    prefill = d.engine.prefills[-1]
    assert prefill.mode is DraftMode.PREFILL and not prefill.source_words and not prefill.target_prefix
    assert prefill.cache_key == "mt_test"
    assert prefill.history == (("how are you?", "wie geht es?"), ("big street", "große Straße"))
    d.update(["Hello"], utterance=5)
    d.run()
    assert d.engine.requests[-1].history == prefill.history, "the head the next draft holds"
    assert len(d.engine.prefills) == 5, "none while an utterance is open"
    assert not [e for e in d.out if isinstance(e, Error)], "a prefill answers nothing"


def test_no_prefill_when_the_next_utterance_came_first_or_keeps_no_history() -> None:
    d = Driver()
    talk(d, SENTENCES[:4])
    d.update(SENTENCES[4], utterance=4, final=True)
    job = d.session.next_job()
    assert job is not None
    d.session.job_done(job, d.engine.draft(job.request))
    d.update(["the"], utterance=5)  # before the worker asked again
    d.run()
    assert len(d.engine.prefills) == 4 and d.engine.requests[-1].source_words == ("the",)
    quiet = Driver(overrides={"translation_history_pairs": 0})
    talk(quiet, SENTENCES)
    assert not quiet.engine.prefills


def test_a_failed_prefill_is_not_reported() -> None:
    d = Driver()
    talk(d, SENTENCES[:4])
    d.update(SENTENCES[4], utterance=4, final=True)
    final = d.session.next_job()
    assert final is not None and final.kind is JobKind.FINAL
    d.session.job_done(final, d.engine.draft(final.request))
    prefill = d.session.next_job()
    assert prefill is not None and prefill.kind is JobKind.PREFILL
    d.session.job_failed(prefill, EngineFailure("the engine broke"))
    assert not [e for e in d.take() if isinstance(e, Error)]
    assert d.session.next_job() is None, "not again: the next draft computes the head itself"
