"""A segment that holds several sentences is translated a sentence an utterance.

The speech front cuts segments at pauses; a speaker who goes on from one sentence to the next
without one gave MT a single utterance of all of them, whose final pass translated everything
after the last commit once the segment ended. The translator closes an utterance where a
sentence ended among the committed words, as WhisperLiveKit's client closes one at its
punctuation, and the segment goes on in the next utterance.
"""

from __future__ import annotations

from dragoman.sessions.mt.events import MTJob
from dragoman.sessions.translation.session import END_LAG_SECONDS
from dragoman.streaming.clauses import ends_sentence
from harness.mt_fakes import target_words
from tests.unit.test_translation_session import Harness


def _answer(h: Harness) -> list[MTJob]:
    """Draft every MT job there is; the jobs, in order."""
    translator = h.session.translator
    jobs = []
    while (job := translator.next_job()) is not None:
        jobs.append(job)
        translator.job_done(job, h.mt.draft(job.request))
    h.drain()
    return jobs


def _finals(jobs: list[MTJob]) -> list[tuple[str, ...]]:
    """The source words of each final (once: a draft the fake MT "copies" is drafted again)."""
    return list(dict.fromkeys(tuple(job.request.source_words) for job in jobs if job.kind.value == "final"))


def test_a_sentence_ended_in_the_committed_words_closes_its_utterance() -> None:
    h = Harness()
    translator = h.session.translator
    translator.begin("item_a")
    translator.partial("item_a", "Hello world, how are you? the", 25, 100.0)
    assert _finals(_answer(h)) == [], "the next sentence has not begun"
    text = "Hello world, how are you? The house"
    translator.partial("item_a", text, len(text), 200.0)
    jobs = _answer(h)
    assert _finals(jobs) == [("Hello", "world,", "how", "are", "you?")]
    assert [job.utterance_id for job in jobs if job.kind.value == "partial"] == [1]
    translator.final("item_a", "Hello world, how are you? The house is red.", 300.0)
    assert _finals(_answer(h)) == [("The", "house", "is", "red.")], "the rest, in the next utterance"
    assert translator.idle
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? THE Haus ist rot."


def test_the_segment_ends_once_however_many_sentences_it_held() -> None:
    """The sentence's final is not the segment's: the end lag is observed once, at its end."""
    h = Harness()
    translator = h.session.translator
    translator.begin("item_a")
    h.session.timeline.ends["item_a"] = 250.0  # the VAD heard the speech end
    text = "Hello world, how are you? The house"
    translator.partial("item_a", text, len(text), 200.0)
    _answer(h)
    assert not [o for o in h.session.take_observations() if o.metric == END_LAG_SECONDS]
    translator.final("item_a", "Hello world, how are you? The house is red.", 300.0)
    _answer(h)
    lags = [o for o in h.session.take_observations() if o.metric == END_LAG_SECONDS]
    assert len(lags) == 1


def test_no_utterance_is_closed_at_an_abbreviation_or_past_mts_bound() -> None:
    h = Harness()
    translator = h.session.translator
    translator.begin("item_a")
    text = "Hello Dr. Who and the U.S. House is red. The"
    translator.partial("item_a", text, len(text), 100.0)
    assert _finals(_answer(h)) == [("Hello", "Dr.", "Who", "and", "the", "U.S.", "House", "is", "red.")]
    bounded = Harness(max_utterance_words=3)
    translator = bounded.session.translator
    translator.begin("item_a")
    text = "Hello world, how are you? The"
    translator.partial("item_a", text, len(text), 100.0)
    jobs = _answer(bounded)
    assert [job.kind.value for job in jobs if job.kind.value != "prefill"] == ["forced_final"]


def test_a_segment_split_at_sentences_and_forced_closed_loses_and_repeats_no_word() -> None:
    h = Harness(max_utterance_words=4)
    translator = h.session.translator
    translator.begin("item_a")
    sentences = ["Hello world.", "The house is red and big.", "How are you?"]
    words = " ".join(sentences).split()
    for n in range(1, len(words) + 1):
        text = " ".join(words[:n])
        translator.partial("item_a", text, len(text), 100.0 * n)
        _answer(h)
    translator.final("item_a", " ".join(sentences), 2000.0)
    _answer(h)
    assert translator.idle
    expected = " ".join(" ".join(target_words(sentence.split())) for sentence in sentences)
    assert h.text("session.output_transcript.delta") == expected


def test_ends_sentence() -> None:
    assert ends_sentence("you?", "The") and ends_sentence("red.", "25") and ends_sentence("好。", "他")
    assert ends_sentence("\u201cdone.\u201d", "She")
    assert not ends_sentence("red.", "and"), "a lowercase word goes on with the sentence"
    for word in ("Dr.", "U.S.", "z.B.", "3.", "J.", "..."):
        assert not ends_sentence(word, "The"), word
