"""No English copies: a draft that repeats the source is redrafted with the target language forced."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dragoman.engines.mt.base import MTDraft, MTRequest
from dragoman.sessions.mt.events import JobKind, Translation
from dragoman.streaming.copy_check import copies_source
from harness import mt_fakes
from tests.unit.test_mt_session import Driver

SOURCE = "Dr. Ehud Ur, professor of medicine at Dalhousie University, cautioned that the research is early."


@pytest.mark.parametrize(
    ("target", "lang", "copy"),
    [
        ("Dr. Ehud Ur, professor of medicine at", "de", True),
        ("Dr. Ehud Ur, Professor für Medizin an der Dalhousie University", "de", False),  # names are kept
        ("Dr. Ehud Ur, professore di medicina", "it", False),
        ("The", "de", True),
        ("Die Forschung", "de", False),
        ("In", "de", False),  # "in" is German too
        ("", "de", False),
        ("Dr. Ehud Ur, professor of medicine", "zh", True),
        ("埃胡德·乌尔博士", "zh", False),
        ("Dr. Ehud Ur 博士", "zh", False),  # a name in Latin script inside Chinese
        ("Dalhousie University", "zh", False),  # names alone: no function word
    ],
)
def test_copies_source(target: str, lang: str, copy: bool) -> None:
    assert copies_source(SOURCE.split(), target, lang) is copy


def test_a_copy_needs_most_words_from_the_source() -> None:
    # A German sentence that happens to contain "the" (a quoted title) is no copy.
    assert not copies_source(SOURCE.split(), "Er las gestern das Buch und sagte, the end", "de")


class CopyingEngine(mt_fakes.FakeEngine):
    """Repeats the source (upper-cased: the fake's unknown words) unless the language is forced."""

    def draft(self, request: MTRequest) -> MTDraft:
        if request.force_target_language:
            return super().draft(request)
        saved = dict(mt_fakes.LEXICON)
        mt_fakes.LEXICON.clear()
        try:
            return super().draft(request)
        finally:
            mt_fakes.LEXICON.update(saved)


def _copying_driver(*, stream_commits: bool = False) -> Driver:
    d = Driver(stream_commits=stream_commits)
    d.engine = CopyingEngine()
    d.session._decode = d.engine.decode  # the session decodes with its engine's vocabulary
    return d


def _words(n: int) -> Sequence[str]:
    return ["the", "house", "is", "red."][:n]


def test_a_copied_partial_is_redrafted_with_the_language_forced_and_nothing_english_is_sent() -> None:
    d = _copying_driver()
    d.update(["the", "house"], ["is"])
    d.run()
    kinds = [(r.force_target_language, r.mode) for r in d.engine.requests]
    assert [forced for forced, _ in kinds] == [False, True]
    sent = d.translations()
    assert len(sent) == 1 and sent[0].committed_text == "die Haus"
    assert d.session.stats["copy_redrafts"] == 1
    # Later requests of the utterance keep the language forced; the check does not run again.
    d.update(list(_words(3)), ["red."])
    d.run()
    assert d.engine.requests[-1].force_target_language
    assert d.session.stats["copy_redrafts"] == 1
    # The next utterance starts unforced.
    d.update(list(_words(4)), final=True)
    d.run()
    d.update(["the"], utterance=1)
    d.run()
    first_of_next = [r for r in d.engine.requests if r.source_words == ("the",)]
    assert first_of_next and not first_of_next[0].force_target_language


def test_a_copied_final_is_redrafted_before_the_utterance_closes() -> None:
    d = _copying_driver()
    d.update(list(_words(4)), final=True)
    job = d.session.next_job()
    assert job is not None and job.kind is JobKind.FINAL
    d.session.job_done(job, d.engine.draft(job.request))
    assert d.take() == []  # the copy is not sent
    redraft = d.session.next_job()
    assert redraft is not None and redraft.kind is JobKind.FINAL and redraft.request.force_target_language
    assert redraft.seq == job.seq
    d.session.job_done(redraft, d.engine.draft(redraft.request))
    (out,) = d.take()
    assert isinstance(out, Translation) and out.final and out.committed_text == "die Haus ist rot."
    assert d.session.stats["copy_redrafts"] == 1


def test_a_translation_that_keeps_a_name_enters_the_history() -> None:
    d = _copying_driver()
    # Forced, the fake translates what it knows and keeps the rest ("Sir" stays "SIR").
    d.update(["the", "Sir", "is", "here"], final=True)
    d.run()
    assert d.translations()[-1].committed_text.startswith("die")
    d.update(["the", "house"], utterance=1, final=True)
    d.run()
    history = d.engine.requests[-1].history
    assert history and history[-1][0] == "the Sir is here"


def test_history_skips_a_copy() -> None:
    d = Driver()
    d.engine = mt_fakes.FakeEngine()
    d.session._decode = d.engine.decode
    # The fake upper-cases words it does not know: "WHAT OF THAT" is an English copy, and it
    # stays one when redrafted (this fake ignores the forced language).
    d.update(["what", "of", "that"], final=True)
    d.run()
    assert d.translations()[-1].committed_text == "WHAT OF THAT"
    assert d.session.stats["copy_redrafts"] == 1
    d.update(["the", "house"], utterance=1, final=True)
    d.run()
    assert d.engine.requests[-1].history == ()


def test_a_streaming_draft_that_copies_sends_nothing_before_its_redraft() -> None:
    d = _copying_driver(stream_commits=True)
    d.update(list(_words(3)), ["red."])
    job = d.session.next_job()
    assert job is not None and job.streaming
    copy = d.engine.draft(job.request)
    assert copy.attention is not None
    for tokens in range(1, len(copy.token_ids)):
        part = MTDraft(copy.token_ids[:tokens], copy.attention[:tokens], finished=False)
        d.session.job_progress(job, part)
    d.session.job_done(job, copy)
    assert d.take() == []  # "THE HOUSE IS" never went out, not even "THE"
    redraft = d.session.next_job()
    assert redraft is not None and redraft.request.force_target_language
    d.session.job_done(redraft, d.engine.draft(redraft.request))
    d.take()
    assert [t.committed_text for t in d.translations()] == ["die Haus ist"]
