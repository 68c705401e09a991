"""The sans-I/O MT session driven by a word-for-word fake engine (no model, no sockets)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import pytest

from dragoman.engines.mt.base import DraftMode, MTDraft
from dragoman.errors import EngineFailure
from dragoman.sessions.mt.events import (
    Error,
    ErrorCode,
    Init,
    InitOk,
    JobKind,
    ServerEvent,
    Translation,
    Update,
    Word,
)
from dragoman.sessions.mt.session import MTSession
from dragoman.streaming.alignatt import AlignAttParams
from harness.mt_fakes import FakeEngine

EventT = TypeVar("EventT", bound=ServerEvent)

#: Margin 0 keeps the arithmetic obvious; presets are tested separately.
PRESETS = {
    "plain": AlignAttParams(frontier_margin=0, max_draft_tokens=16, history_pairs=2),
    "careful": AlignAttParams(frontier_margin=2, max_draft_tokens=16),
}


class Driver:
    """A session plus its engine; `run()` plays the server's worker synchronously."""

    def __init__(
        self,
        *,
        max_words: int = 50,
        max_finals: int = 16,
        directions: Sequence[str] = (),
        stream_commits: bool = False,
        **init: Any,
    ) -> None:
        self.engine = FakeEngine(directions) if directions else FakeEngine()
        self.session = MTSession(
            session_id="mt_test",
            engine_name=self.engine.name,
            directions=self.engine.directions(),
            decode=self.engine.decode,
            default_preset="plain",
            max_utterance_words=max_words,
            presets=PRESETS,
            max_queued_finals=max_finals,
            stream_commits=stream_commits,
        )
        self.seq = 0
        self.clock = 0.0
        self.out: list[ServerEvent] = []
        if init.pop("skip_init", False):
            return
        fields: dict[str, Any] = {"protocol_version": 1, "source_lang": "en", "target_lang": "de"} | init
        self.send(Init(**fields))

    def send(self, event: Init | Update) -> list[ServerEvent]:
        self.session.receive(event)
        return self.take()

    def take(self) -> list[ServerEvent]:
        events = self.session.events_to_send()
        self.out.extend(events)
        return events

    def update(
        self,
        words: Sequence[str],
        tail: Sequence[str] = (),
        *,
        utterance: int = 0,
        final: bool = False,
        seq: int | None = None,
        clock: float | None = None,
    ) -> list[ServerEvent]:
        self.seq = seq if seq is not None else self.seq + 1
        self.clock = clock if clock is not None else max(self.clock, 500.0 * len(words) + 100)
        committed = tuple(Word(w, 500.0 * i, 500.0 * i + 400) for i, w in enumerate(words))
        return self.send(Update(self.seq, utterance, committed, tuple(tail), self.clock, final))

    def run(self) -> list[ServerEvent]:
        """Make every engine call the session asks for; return what it sent meanwhile."""
        start = len(self.out)
        while (job := self.session.next_job()) is not None:
            self.session.job_done(job, self.engine.draft(job.request))
            self.take()
        return self.out[start:]

    def translations(self) -> list[Translation]:
        return [e for e in self.out if isinstance(e, Translation)]


def only(events: Sequence[ServerEvent], kind: type[EventT]) -> EventT:
    assert len(events) == 1 and isinstance(events[0], kind), events
    return events[0]


def last_translation(events: Sequence[ServerEvent]) -> Translation:
    """The last of `events`, a translation."""
    assert isinstance(events[-1], Translation), events
    return events[-1]


# -- init ------------------------------------------------------------------------


def test_init_ok_names_direction_preset_and_model() -> None:
    d = Driver(source_lang="EN", target_lang="de-DE")
    assert only(d.out, InitOk) == InitOk("en-de", "plain", "fake-lexicon")
    assert not d.session.closed


@pytest.mark.parametrize(
    ("fields", "code", "needle"),
    [
        ({"protocol_version": 2}, ErrorCode.BAD_PROTOCOL, "protocol_version 2"),
        ({"preset": "turbo"}, ErrorCode.BAD_PROTOCOL, "unknown preset 'turbo'"),
        (
            {"overrides": {"translation_alignatt_frontier_margin": -1}},
            ErrorCode.BAD_PROTOCOL,
            "frontier_margin",
        ),
        (
            {"overrides": {"translation_alignatt_commit_fast_path": 1}},
            ErrorCode.BAD_PROTOCOL,
            "true or false",
        ),
        ({"overrides": {"translation_alignatt_max_draft_tokens": True}}, ErrorCode.BAD_PROTOCOL, "max_draft"),
        ({"context_text": "x" * 5000}, ErrorCode.BAD_PROTOCOL, "limited"),
        ({"target_lang": "fr"}, ErrorCode.UNSUPPORTED_DIRECTION, "en-fr"),
    ],
)
def test_a_bad_init_is_an_error_and_closes(fields: dict[str, Any], code: ErrorCode, needle: str) -> None:
    d = Driver(**fields)
    error = only(d.out, Error)
    assert error.code is code and needle in error.message
    assert d.session.closed and d.session.next_job() is None


def test_a_huge_client_string_is_not_echoed_whole() -> None:
    d = Driver(preset="p" * 100_000)
    error = only(d.out, Error)
    assert error.code is ErrorCode.BAD_PROTOCOL and "unknown preset 'ppp" in error.message
    assert len(error.message) < 200


def test_unsupported_direction_lists_the_supported_ones() -> None:
    d = Driver(source_lang="de", target_lang="en")
    assert only(d.out, Error).supported == ("en-de", "en-it", "en-zh")


def test_whitelisted_overrides_apply_and_unknown_keys_are_ignored() -> None:
    d = Driver(
        overrides={
            "translation_alignatt_frontier_margin": 3,
            "translation_alignatt_inaccessible_ms": 250,
            "translation_alignatt_hold_back_target_units": 1,
            "translation_alignatt_min_emit_target_units": 2,
            "translation_alignatt_max_draft_tokens": 8,
            "translation_alignatt_commit_fast_path": False,
            "translation_alignatt_stop_at_frontier": True,
            "translation_alignatt_past_frontier_tokens": 2,
            "translation_alignatt_unsegmented_hold_back": 1,
            "translation_alignatt_hold_articles": False,
            "translation_history_pairs": 5,
            "vllm_gpu_memory_utilization": 0.99,
        }
    )
    assert isinstance(d.out[0], InitOk)
    assert d.session.setup is not None
    assert d.session.setup.params == AlignAttParams(
        frontier_margin=3,
        inaccessible_ms=250.0,
        hold_back_target_units=1,
        min_emit_target_units=2,
        max_draft_tokens=8,
        commit_fast_path=False,
        history_pairs=5,
        stop_at_frontier=True,
        past_frontier_tokens=2,
        unsegmented_hold_back=1,
        hold_articles=False,
    )


def test_an_update_before_init_is_bad_protocol_and_closes() -> None:
    d = Driver(skip_init=True)
    error = only(d.update(["Hello"]), Error)
    assert error.code is ErrorCode.BAD_PROTOCOL and error.seq == 1
    assert d.session.closed


def test_a_second_init_is_refused_but_the_session_goes_on() -> None:
    d = Driver()
    error = only(d.send(Init(1, "en", "it")), Error)
    assert error.code is ErrorCode.BAD_PROTOCOL
    assert not d.session.closed
    d.update(["Hello"], final=True)
    assert last_translation(d.run()).committed_text == "Hallo"


# -- update validation -------------------------------------------------------------


def test_update_errors_are_bad_protocol_and_leave_the_session_usable() -> None:
    d = Driver()
    d.update(["Hello"], ["world,"], seq=5)
    d.run()
    # seq must increase
    assert only(d.update(["Hello", "world,"], seq=5), Error).code is ErrorCode.BAD_PROTOCOL
    # clock_ms before the end of a committed word (word 1 ends at 900 ms)
    error = only(d.update(["Hello", "world,"], seq=6, clock=850.0), Error)
    assert "largest committed end_ms" in error.message and error.seq == 6
    # clock going backwards
    d.update(["Hello"], ["world,"], seq=7, clock=5000.0)
    d.run()
    assert "monotone" in only(d.update(["Hello"], seq=8, clock=4000.0), Error).message
    # a word that starts after it ends
    bad = Update(9, 0, (Word("Hello", 300.0, 200.0),), (), 6000.0)
    assert "starts after it ends" in only(d.send(bad), Error).message
    # utterance_id neither the open one nor the next
    error = only(d.update(["Hello"], utterance=7, seq=10, clock=6000.0), Error)
    assert error.code is ErrorCode.BAD_PROTOCOL and "utterance_id 7" in error.message and error.seq == 10
    # still usable
    d.update(["Hello", "world,"], final=True, seq=11, clock=6000.0)
    assert d.run()[-1] == Translation(11, 0, True, "Hallo Welt,", " Welt,", "", 2, "final")


# -- streaming, the frontier and the fast path -------------------------------------


def test_a_partial_commits_what_attends_to_committed_words_and_drafts_over_the_tail() -> None:
    d = Driver()
    d.update(["Hello", "world,"], ["how", "are"])
    job = d.session.next_job()
    assert job is not None and job.kind is JobKind.PARTIAL
    assert job.request.source_words == ("Hello", "world,", "how", "are")
    assert job.request.mode is DraftMode.PARTIAL and job.request.target_prefix == ""
    assert job.request.max_new_tokens == 16 and job.request.cache_key == "mt_test"
    d.session.job_done(job, d.engine.draft(job.request))
    out = only(d.take(), Translation)
    assert out == Translation(
        1, 0, False, "Hallo Welt,", "Hallo Welt,", "wie geht", 2, "alignatt:attention_frontier"
    )


def test_the_frontier_margin_holds_the_last_source_words() -> None:
    d = Driver(preset="careful")
    d.update(["Hello", "world,", "how", "are"])
    out = only(d.run(), Translation)
    assert (out.committed_text, out.buffer_text, out.stop_reason) == (
        "Hallo Welt,",
        "wie geht",
        "alignatt:attention_frontier",
    )


def test_asr_commits_of_tail_words_are_released_without_an_engine_call() -> None:
    d = Driver()
    d.update(["Hello"], ["world,", "how", "are"])
    d.run()
    calls = len(d.engine.requests)
    # The ASR commits "world," which the draft already covered as tail: same prompt.
    out = only(d.update(["Hello", "world,"], ["how", "are"]), Translation)
    assert len(d.engine.requests) == calls and d.session.next_job() is None
    assert out == Translation(
        2, 0, False, "Hallo Welt,", " Welt,", "wie geht", 2, "alignatt:commit_fast_path"
    )
    out = only(d.update(["Hello", "world,", "how"], ["are"]), Translation)
    assert (out.committed_delta, out.stop_reason) == (" wie", "alignatt:commit_fast_path")
    assert len(d.engine.requests) == calls
    assert d.session.stats["fast_path"] == 2
    # A new word changes the prompt: the engine drafts again, continuing the accepted target.
    d.update(["Hello", "world,", "how", "are"], ["you?"])
    out = only(d.run(), Translation)
    assert d.engine.requests[-1].target_prefix == "Hallo Welt, wie"
    assert (out.committed_text, out.committed_delta, out.stop_reason) == (
        "Hallo Welt, wie geht",
        " geht",
        "alignatt:attention_frontier",
    )


def test_the_fast_path_can_be_turned_off() -> None:
    d = Driver(overrides={"translation_alignatt_commit_fast_path": False})
    d.update(["Hello"], ["world,"])
    d.run()
    d.update(["Hello", "world,"])
    assert d.take() == [] and d.session.next_job() is not None


def test_drafts_can_end_at_the_frontier_and_a_spent_draft_goes_back_to_the_engine() -> None:
    d = Driver(
        overrides={
            "translation_alignatt_stop_at_frontier": True,
            "translation_alignatt_past_frontier_tokens": 0,
        }
    )
    d.update(["Hello"], ["world,", "how"])
    out = only(d.run(), Translation)
    request = d.engine.requests[-1]
    assert (request.frontier_word, request.past_frontier_tokens) == (1, 0)
    # The draft ended with the first token past the frontier ("Welt," attends to the tail).
    assert (out.committed_text, out.buffer_text, out.stop_reason) == (
        "Hallo",
        "Welt,",
        "alignatt:attention_frontier",
    )
    # The ASR commits "world,": a re-cut of that short draft could release nothing, so the
    # engine drafts again instead of answering with an empty fast-path commit.
    d.update(["Hello", "world,"], ["how"])
    out = only(d.run(), Translation)
    assert len(d.engine.requests) == 2 and d.session.stats["fast_path"] == 0
    assert (out.committed_text, out.committed_delta) == ("Hallo Welt,", " Welt,")
    assert d.engine.requests[-1].frontier_word == 2


def test_drafts_run_past_the_frontier_by_default() -> None:
    d = Driver()
    d.update(["Hello"], ["world,", "how"])
    d.run()
    assert d.engine.requests[-1].frontier_word is None


def test_a_partial_with_no_source_is_answered_without_the_engine() -> None:
    d = Driver()
    out = only(d.update([]), Translation)
    assert (out.committed_text, out.stop_reason) == ("", "alignatt:no_source")
    assert d.engine.requests == []


def test_committed_text_is_append_only_byte_for_byte() -> None:
    d = Driver()
    sentence = ["the", "big", "street", "is", "red."]
    for n in range(1, len(sentence) + 1):
        d.update(sentence[:n], sentence[n : n + 1])
        d.run()
    d.update(sentence, final=True)
    d.run()
    shown = ""
    for out in d.translations():
        assert out.committed_text == shown + out.committed_delta
        shown = out.committed_text
    assert shown == "die große Straße ist rot."
    assert d.translations()[-1].final


def test_multibyte_words_split_across_tokens_commit_whole() -> None:
    d = Driver()
    d.update(["greetings"], ["world,"])
    out = only(d.run(), Translation)
    assert (out.committed_text, out.buffer_text) == ("Grüße", "Welt,")


# -- scheduling ----------------------------------------------------------------------


def test_the_latest_partial_wins_and_the_newest_seq_is_answered() -> None:
    d = Driver()
    d.update(["Hello"])
    job = d.session.next_job()
    assert job is not None
    d.update(["Hello", "world,"])  # queued while the engine works
    d.update(["Hello", "world,", "how"], ["are"])  # replaces it
    assert d.take() == []
    d.session.job_done(job, d.engine.draft(job.request))
    d.take()
    d.run()
    assert [t.seq for t in d.translations()] == [1, 3]
    assert d.translations()[-1].committed_text == "Hallo Welt, wie"
    assert d.session.stats["coalesced"] == 1


def test_finals_are_sticky_ordered_and_supersede_their_utterances_partial() -> None:
    d = Driver()
    d.update(["Hello"])
    job = d.session.next_job()
    assert job is not None
    d.update(["Hello", "world,"])  # partial, superseded by the final below
    d.update(["Hello", "world,", "how"], final=True)
    d.update(["the"], utterance=1, final=True)
    d.update(["the", "house"], utterance=2)  # partial of the next utterance
    d.session.job_done(job, d.engine.draft(job.request))
    d.take()
    d.run()
    answered = [(t.seq, t.utterance_id, t.final) for t in d.translations()]
    assert answered == [(1, 0, False), (3, 0, True), (4, 1, True), (5, 2, False)]
    assert d.session.stats["coalesced"] == 1


def test_finals_waiting_past_the_bound_are_dropped_with_processing_failed_and_the_session_goes_on() -> None:
    d = Driver(max_finals=2)
    d.update(["Hello"])
    job = d.session.next_job()  # the engine is busy with it while finals pile up
    assert job is not None
    for utterance in range(4):
        d.update(["word"], utterance=utterance, final=True)
    dropped = [e for e in d.out if isinstance(e, Error)]
    assert [(e.code, e.seq) for e in dropped] == [
        (ErrorCode.PROCESSING_FAILED, 4),
        (ErrorCode.PROCESSING_FAILED, 5),
    ]
    assert "2 finals" in dropped[0].message and d.session.stats["dropped_finals"] == 2
    d.session.job_done(job, d.engine.draft(job.request))
    d.take()
    d.run()
    answered = [(t.seq, t.utterance_id, t.final) for t in d.translations()]
    assert answered == [(1, 0, False), (2, 0, True), (3, 1, True)]
    # The client closed the dropped utterances all the same: its next one is served.
    d.update(["again"], utterance=4, final=True)
    d.run()
    assert d.translations()[-1].seq == d.seq and d.translations()[-1].final


def test_a_final_continues_the_streamed_partial_and_enters_the_history() -> None:
    d = Driver()
    d.update(["Hello", "world,"], ["how"])
    d.run()
    d.update(["Hello", "world,", "how", "are", "you?"], final=True)
    job = d.session.next_job()
    assert job is not None and job.kind is JobKind.FINAL
    assert job.request.mode is DraftMode.FINAL and job.request.target_prefix == "Hallo Welt,"
    assert job.request.source_words == ("Hello", "world,", "how", "are", "you?")
    d.session.job_done(job, d.engine.draft(job.request))
    out = only(d.take(), Translation)
    assert out == Translation(2, 0, True, "Hallo Welt, wie geht es?", " wie geht es?", "", 5, "final")
    # The next update must use utterance_id + 1; the history now holds the pair.
    d.update(["big"], ["house"], utterance=1)
    d.run()
    assert d.engine.requests[-1].history == (("Hello world, how are you?", "Hallo Welt, wie geht es?"),)
    assert d.translations()[-1].committed_text == "große"


def test_an_empty_final_closes_the_utterance_without_the_engine() -> None:
    d = Driver()
    out = only(d.update([], final=True), Translation)
    assert out.final and out.committed_text == "" and d.engine.requests == []
    d.update(["Hello"], utterance=1, final=True)
    assert last_translation(d.run()).committed_text == "Hallo"


def test_skipping_the_final_closes_the_open_utterance() -> None:
    d = Driver()
    d.update(["Hello"], ["world,"])
    d.run()
    d.update(["the"], utterance=1, final=True)
    out = last_translation(d.run())
    assert (out.utterance_id, out.committed_text) == (1, "die")
    # Utterance 0 is closed: going back to it is a protocol error.
    error = only(d.update(["Hello", "world,"], utterance=0), Error)
    assert error.code is ErrorCode.BAD_PROTOCOL


# -- forced finals ---------------------------------------------------------------


def test_too_many_words_force_a_final_and_the_client_moves_on() -> None:
    d = Driver(max_words=3)
    d.update(["Hello", "world,", "how"], ["are"])
    d.run()
    d.update(["Hello", "world,", "how", "are"], ["you?"])
    job = d.session.next_job()
    assert job is not None and job.kind is JobKind.FORCED_FINAL and job.request.mode is DraftMode.FINAL
    assert job.request.source_words == ("Hello", "world,", "how", "are")  # the tail is left out
    d.session.job_done(job, d.engine.draft(job.request))
    out = only(d.take(), Translation)
    assert (out.final, out.forced_final, out.committed_text, out.committed_delta) == (
        True,
        True,
        "Hallo Welt, wie geht",
        " geht",
    )
    # The client bumps its utterance_id as for its own finalization.
    d.update(["you?"], utterance=1, final=True)
    assert d.run()[-1] == Translation(3, 1, True, "es?", "es?", "", 1, "final")


def test_updates_for_the_forced_utterance_still_in_flight_get_the_forced_final_again() -> None:
    d = Driver(max_words=2)
    d.update(["Hello", "world,", "how"])
    job = d.session.next_job()
    assert job is not None and job.kind is JobKind.FORCED_FINAL
    d.update(["Hello", "world,", "how", "are"])  # sent before the client saw the rollover
    d.session.job_done(job, d.engine.draft(job.request))
    d.take()
    d.run()
    first, second = d.translations()
    assert (first.seq, first.forced_final, second.seq, second.forced_final) == (1, True, 2, True)
    assert second.committed_text == first.committed_text == "Hallo Welt, wie"
    assert second.committed_delta == "" and second.utterance_id == 0


def test_old_words_in_front_of_the_next_utterance_are_not_translated_twice() -> None:
    # WhisperLiveKit can queue the rolled-over words plus a few more as its next final.
    d = Driver(max_words=2)
    d.update(["Hello", "world,", "how"])
    d.run()
    d.update(["Hello", "world,", "how", "are", "you?"], utterance=1, final=True)
    job = d.session.next_job()
    assert job is not None and job.request.source_words == ("are", "you?")
    d.session.job_done(job, d.engine.draft(job.request))
    assert only(d.take(), Translation).committed_text == "geht es?"


# -- reconnects: history and accepted_target_prefix ---------------------------------


def test_accepted_target_prefix_is_continued_never_re_emitted() -> None:
    d = Driver(accepted_target_prefix="Hallo Welt,", history=[["A.", "A."]] * 8)
    d.update(["Hello", "world,", "how"], ["are"], utterance=4)
    job = d.session.next_job()
    assert job is not None and job.request.target_prefix == "Hallo Welt,"
    d.session.job_done(job, d.engine.draft(job.request))
    out = only(d.take(), Translation)
    assert (out.committed_text, out.committed_delta) == ("Hallo Welt, wie", " wie")
    d.update(["Hello", "world,", "how", "are"], utterance=4, final=True)
    out = last_translation(d.run())
    assert (out.committed_text, out.committed_delta) == ("Hallo Welt, wie geht", " geht")
    # The prefix belonged to that utterance only.
    d.update(["big"], ["house"], utterance=5)
    assert last_translation(d.run()).committed_text == "große"


def test_the_history_window_takes_the_last_pairs() -> None:
    history = [[f"s{i}", f"t{i}"] for i in range(8)]
    d = Driver(history=history, context_text="  Diabetes research  ")
    d.update(["Hello"])
    d.run()
    request = d.engine.requests[-1]
    assert request.history == (("s6", "t6"), ("s7", "t7"))
    assert request.context_text == "Diabetes research"
    wide = Driver(history=history, overrides={"translation_history_pairs": 0})
    wide.update(["Hello"])
    wide.run()
    assert wide.engine.requests[-1].history == ()


# -- engine failures -----------------------------------------------------------------


def test_processing_failed_drops_the_update_and_the_session_goes_on() -> None:
    d = Driver()
    d.engine.failures.append(RuntimeError("CUDA out of memory at /srv/secret/model.py"))
    d.update(["Hello"])
    job = d.session.next_job()
    assert job is not None
    with pytest.raises(RuntimeError):
        d.engine.draft(job.request)
    d.session.job_failed(job, EngineFailure("draft failed", error_id="err_0123"))
    error = only(d.take(), Error)
    assert (error.code, error.seq, error.error_id) == (ErrorCode.PROCESSING_FAILED, 1, "err_0123")
    assert "secret" not in error.message and "memory" not in error.message
    d.update(["Hello", "world,"], ["how"])
    assert last_translation(d.run()).committed_text == "Hallo Welt,"


def test_a_failed_final_leaves_the_utterance_open_for_the_retry() -> None:
    d = Driver()
    d.engine.failures.append(EngineFailure("boom"))
    d.update(["Hello"], final=True)
    job = d.session.next_job()
    assert job is not None
    try:
        d.engine.draft(job.request)
    except EngineFailure as exc:
        d.session.job_failed(job, exc)
    assert only(d.take(), Error).code is ErrorCode.PROCESSING_FAILED
    d.update(["Hello", "world,"], final=True)  # the client retries with the same utterance_id
    assert d.run()[-1] == Translation(2, 0, True, "Hallo Welt,", "Hallo Welt,", "", 2, "final")


def test_a_malformed_draft_changes_nothing_and_can_be_failed() -> None:
    d = Driver()
    d.update(["Hello"], ["world,"])
    job = d.session.next_job()
    assert job is not None
    with pytest.raises(ValueError):
        d.session.job_done(job, MTDraft([1, 2], np.zeros((1, 2), dtype=np.float32), finished=True))
    with pytest.raises(ValueError):
        d.session.job_done(job, MTDraft([1], None, finished=True))
    d.session.job_failed(job, EngineFailure("bad draft", error_id="err_x"))
    assert only(d.take(), Error).seq == 1
    d.update(["Hello", "world,"], ["how"])
    assert last_translation(d.run()).committed_text == "Hallo Welt,"
