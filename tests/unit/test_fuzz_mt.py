"""A property-based fuzzer for MT protocol v1, in-process.

Client frames (valid, mutated and hostile; `fuzz_strategies`) and engine outcomes
(drafts, failures) are interleaved in any order, through the connection's real codec
(`MTCodec`: the protocol parser and writer), a real `MTSession` and the word-for-word
fake engine of the MT unit tests. The properties:

- nothing raises;
- every frame the server writes is UTF-8 text that parses as an MT server message;
- every hostile frame is answered with one `bad_protocol` error, and no client frame with
  our own `processing_failed`;
- the session never closes once initialized, and afterwards still translates an utterance.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dragoman.errors import ClientError, EngineFailure, RequestRejected
from dragoman.protocol.mt import ErrorMessage, TranslationMessage, parse_server_message
from dragoman.sessions.mt.events import ErrorCode
from dragoman.sessions.mt.session import MTSession
from dragoman.transports.websocket.mt import MTCodec
from harness.mt_fakes import LEXICON, FakeEngine
from tests.unit.fuzz_strategies import FUZZ, Frame, frames, hostile, json_values, strict_loads
from tests.unit.test_mt_session import PRESETS

MAX_MESSAGE = 600
TYPES = ("init", "update")
#: The words of the last, well-behaved utterance: kept out of the fuzzed words, so that no
#: forced final's carry-over can strip them.
CHECK_WORD, CHECK_TRANSLATION = "greetings", "Grüße"

# -- event strategies ----------------------------------------------------------------------

odd_words = st.one_of(
    st.text(min_size=1, max_size=12),
    st.sampled_from(["  ", "日本語", "x" * 200, "x" * 201, "\u0301", "a b"]),
)
lexicon = st.sampled_from([word for word in LEXICON if word != CHECK_WORD])
word_text = st.integers(0, 5).flatmap(lambda pick: odd_words if pick == 0 else lexicon)
times: st.SearchStrategy[Sequence[float | None]] = st.one_of(
    st.tuples(st.integers(0, 9000), st.integers(0, 900)).map(lambda t: [t[0], t[0] + t[1]]),
    st.tuples(st.floats(0, 9000), st.floats(0, 900)).map(lambda t: [t[0], t[0] + t[1]]),
    st.sampled_from([[None, None], [None, 500], [300, None]]),
)
word = st.tuples(word_text, times).map(lambda w: [w[0], *w[1]])
#: `$next` and `$clock` are filled in when the frame is sent: a seq past the last, a clock
#: past every word; `$open` and `$following` name the open utterance and the one after it.
update = st.fixed_dictionaries(
    {
        "type": st.just("update"),
        "seq": st.one_of(st.just("$next"), st.just("$next"), st.integers(-3, 40)),
        "utterance_id": st.sampled_from(["$open", "$open", "$following", 0, 1, 5]),
        "words": st.lists(word, max_size=12),
        "clock_ms": st.one_of(st.just("$clock"), st.just("$clock"), st.floats(0, 1e6)),
    },
    optional={
        "tail": st.fixed_dictionaries({}, optional={"words": st.lists(word, max_size=4)}),
        "is_final": st.booleans(),
    },
)
init = st.fixed_dictionaries(
    {
        "type": st.just("init"),
        "protocol_version": st.sampled_from([1, 1, 2]),
        "source_lang": st.sampled_from(["en", "EN", "en-US", "de", ""]),
        "target_lang": st.sampled_from(["de", "it", "zh", "fr"]),
    },
    optional={
        "preset": st.sampled_from(["plain", "careful", "turbo"]),
        "overrides": st.dictionaries(
            st.sampled_from(
                [
                    "translation_alignatt_frontier_margin",
                    "translation_alignatt_inaccessible_ms",
                    "translation_alignatt_max_draft_tokens",
                    "translation_alignatt_commit_fast_path",
                    "translation_alignatt_stop_at_frontier",
                    "translation_history_pairs",
                    "unknown_knob",
                ]
            ),
            json_values,
            max_size=3,
        ),
        "context_text": st.one_of(st.none(), st.text(max_size=30)),
        "history": st.lists(st.tuples(st.text(max_size=10), st.text(max_size=10)).map(list), max_size=3),
        "accepted_target_prefix": st.text(max_size=20),
    },
)
#: Mostly updates: an init after the first is always refused.
events = st.integers(0, 7).flatmap(lambda pick: init if pick == 0 else update)

engine_actions = st.tuples(st.sampled_from(["take", "done", "done", "fail"]), st.booleans())
actions = st.lists(
    st.one_of(frames(events, TYPES), frames(events, TYPES), engine_actions), min_size=4, max_size=24
)


# -- the harness ---------------------------------------------------------------------------


class Harness:
    """An MT session behind its connection's codec, as `transports/websocket/mt.py` runs it."""

    def __init__(self) -> None:
        self.engine = FakeEngine()
        self.session = MTSession(
            session_id="mt_fuzz",
            engine_name=self.engine.name,
            directions=self.engine.directions(),
            decode=self.engine.decode,
            default_preset="plain",
            max_utterance_words=8,
            presets=PRESETS,
        )
        self.codec = MTCodec()
        self.job: Any = None
        self.seq = 0
        self.clock = 10_000.0
        self.utterance = 0

    def written(self, events: list[Any]) -> list[Any]:
        out = []
        for event in events:
            frame = self.codec.write(event)
            frame.encode("utf-8")  # a text frame must be sendable
            assert "/opt/" not in frame, "no server path or exception text reaches a client"
            strict_loads(frame)
            message = parse_server_message(frame)
            if isinstance(message, ErrorMessage):
                assert len(message.message) <= MAX_MESSAGE, message
            if isinstance(message, TranslationMessage) and message.final:
                self.utterance = message.utterance_id + 1
            out.append(message)
        return out

    def fill(self, raw: str | bytes) -> str | bytes:
        """The placeholders of a drawn update, as a client that keeps the protocol would send."""
        if not isinstance(raw, str) or "$" not in raw:
            return raw
        self.seq += 1
        self.clock += 1000.0
        places = {
            '"$next"': str(self.seq),
            '"$clock"': repr(self.clock),
            '"$open"': str(self.utterance),
            '"$following"': str(self.utterance + 1),
        }
        for place, value in places.items():
            raw = raw.replace(place, value)
        return raw

    def frame(self, frame: Frame) -> list[Any]:
        raw = self.fill(frame.raw)
        try:
            event = self.codec.parse(raw)
        except ClientError as exc:  # the driver answers a refused frame itself
            out = self.written([self.codec.refusal(exc, raw)])
        else:
            self.session.receive(event)
            out = self.written(self.session.events_to_send())
            if getattr(event, "utterance_id", None) == self.utterance + 1:
                self.utterance += 1  # the client moved on; the open utterance is abandoned
        for message in out:
            if isinstance(message, ErrorMessage):
                assert message.code == ErrorCode.BAD_PROTOCOL, message
        if frame.bad:
            assert len(out) == 1 and isinstance(out[0], ErrorMessage), (frame, out)
        assert not self.session.closed
        return out

    def engine_action(self, action: str, server_fault: bool) -> list[Any]:
        if self.job is None:
            if action == "take":
                self.job = self.session.next_job()
            return self.written(self.session.events_to_send())  # planning may answer at once
        job, self.job = self.job, None
        if action == "fail":
            error = EngineFailure("CUDA in /opt/x.py") if server_fault else RequestRejected("too long")
            self.session.job_failed(job, error)
        else:
            self.session.job_done(job, self.engine.draft(job.request))
        return self.written(self.session.events_to_send())

    def settle(self) -> list[Any]:
        out = self.engine_action("done", False)
        while (job := self.session.next_job()) is not None:
            self.session.job_done(job, self.engine.draft(job.request))
            out += self.written(self.session.events_to_send())
        return out + self.written(self.session.events_to_send())


def initialized() -> Harness:
    harness = Harness()
    (ok,) = harness.frame(
        Frame(
            json.dumps({"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}),
            False,
            "init",
        )
    )
    assert ok.type == "init_ok"
    return harness


def still_translates(harness: Harness) -> None:
    harness.settle()
    session = harness.session
    # The next utterance: a fresh one, after the open one (abandoned) or the last closed one.
    open_utterance = session._utterances.open
    utterance = open_utterance.id + 1 if open_utterance is not None else (session._utterances.next_id or 0)
    seq = (session._last_seq or 0) + 1
    clock = max(session._last_clock or 0.0, 0.0) + 1000.0
    update = {
        "type": "update",
        "seq": seq,
        "utterance_id": utterance,
        "words": [[CHECK_WORD, None, clock]],
        "clock_ms": clock,
        "is_final": True,
    }
    # An init's accepted_target_prefix still waiting for the first utterance comes first (and
    # the fake engine takes it for the translation of as many source words).
    prefix = session._utterances.pending_prefix
    out = harness.frame(Frame(json.dumps(update), False, "final")) + harness.settle()
    (final,) = [m for m in out if isinstance(m, TranslationMessage) and m.seq == seq]
    assert final.final
    assert final.committed_text.startswith(prefix) if prefix else final.committed_text == CHECK_TRANSLATION


# -- the properties --------------------------------------------------------------------------


def run(harness: Harness, steps: list[Any]) -> None:
    for step in steps:
        if isinstance(step, Frame):
            harness.frame(step)
        else:
            harness.engine_action(*step)


@FUZZ
@given(actions)
@example([Frame('{"type": "update", "words": ' + "[" * 50_000 + "]" * 50_000 + "}", True, "deep")])
@example(
    [
        Frame(
            '{"type": "update", "seq": 1, "utterance_id": 0, "words": [["\\udc00", 0, 1]], "clock_ms": 5}',
            True,
            "surrogate",
        )
    ]
)
def test_mt_sessions_survive_any_client(steps: list[Any]) -> None:
    harness = initialized()
    run(harness, steps)
    still_translates(harness)


@settings(FUZZ, max_examples=max(FUZZ.max_examples // 3, 1))
@given(st.one_of(frames(events, TYPES), hostile(TYPES)))
def test_any_first_message_is_answered(frame: Frame) -> None:
    """The first message must be `init`: anything else is refused with an error, then closed."""
    harness = Harness()
    raw = harness.fill(frame.raw)
    try:
        event = harness.codec.parse(raw)
    except ClientError as exc:
        (message,) = harness.written([harness.codec.refusal(exc, raw)])
        assert message.code == ErrorCode.BAD_PROTOCOL
        return
    assert not frame.bad, frame
    harness.session.receive(event)
    (message,) = harness.written(harness.session.events_to_send())
    if message.type == "init_ok":
        assert not harness.session.closed
        still_translates(harness)
    else:
        assert message.code in (ErrorCode.BAD_PROTOCOL, ErrorCode.UNSUPPORTED_DIRECTION)
        assert harness.session.closed


# -- the corpus: cases that once failed ---------------------------------------------------------


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_deep_nesting_is_bad_protocol(depth: int) -> None:
    # It was a RecursionError out of the parser (and out of peek_seq): a traceback, the connection lost.
    harness = initialized()
    raw = '{"type": "update", "seq": 3, "words": ' + "[" * depth + "]" * depth + "}"
    (error,) = harness.frame(Frame(raw, True, "deep"))
    assert isinstance(error, ErrorMessage) and error.code == ErrorCode.BAD_PROTOCOL
    assert "deeper than 32 levels" in error.message
    assert error.seq == (3 if depth < 900 else None), "its seq, where Python can read one"
    still_translates(harness)


def test_a_lone_surrogate_in_a_word_is_bad_protocol() -> None:
    harness = initialized()
    raw = '{"type": "update", "seq": 1, "utterance_id": 0, "words": [["\\ud800", 0, 1]], "clock_ms": 5}'
    (error,) = harness.frame(Frame(raw, True, "surrogate"))
    assert isinstance(error, ErrorMessage) and "lone surrogate" in error.message
    still_translates(harness)
