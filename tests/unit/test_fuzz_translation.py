"""A property-based fuzzer for the translation session (OpenAI's Realtime translation), in-process.

Client frames (valid, mutated and hostile; `fuzz_strategies`) and engine outcomes (ASR
steps heard or failed, MT drafts done or failed, clauses said or failed) are interleaved in
any order, through the real protocol parser and writer, a real `TranslationSession`, and
the fake engines of its unit tests (`test_translation_session.Harness`). The properties:

- nothing raises;
- every server event validates as the SDK's `RealtimeTranslationServerEvent` (the harness
  checks each), an error's message is short and names no server path;
- every hostile frame is answered with exactly one `invalid_request_error`, and no client
  frame with a `server_error`;
- `session.close` always ends in `session.closed`, whatever failed before it, and nothing
  comes after it;
- a session not closed still translates a phrase afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from dragoman.engines.asr.base import StepResult
from dragoman.errors import EngineFailure, RequestRejected
from dragoman.sessions.agent.jobs import ASR, TTS
from dragoman.sessions.base import CloseCode
from dragoman.sessions.mt.events import MTJob
from dragoman.sessions.speech.decoder import StepJob
from dragoman.sessions.translation.events import CloseSession
from dragoman.sessions.translation.session import MT
from dragoman.sessions.translation.speech_out import SpeakJob
from tests.unit.fuzz_strategies import (
    FUZZ,
    Frame,
    audio_payloads,
    dumps,
    frames,
    json_values,
    pcm,
    strict_loads,
)
from tests.unit.test_translation_session import Harness, silence, tone

MAX_MESSAGE = 600
TYPES = ("session.update", "session.input_audio_buffer.append", "session.close")
LANES = (ASR, MT, TTS)
#: What the fake ASR may hear: words the fake MT knows, and words it does not.
HEARD = ("Hello", "world,", "how", "are", "you?", "the", "big", "house", "is", "red.", "zebra", "日本語", "")

# -- event strategies ----------------------------------------------------------------------

languages = st.sampled_from(["de", "it", "zh", "en", "fr", "", "DE", "de-DE"])
transcription = st.one_of(
    st.none(), st.fixed_dictionaries({"model": st.sampled_from(["whisper", "gpt-4o-transcribe", ""])})
)
noise = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["near_field", "far_field", "studio"])},
        optional={"strength": st.sampled_from([0.0, 0.5, 1.0, 1.5, -1])},
    ),
)
audio_input = st.fixed_dictionaries(
    {},
    optional={
        "transcription": transcription,
        "noise_reduction": noise,
        "format": st.sampled_from([{"type": "audio/pcm", "rate": 24000}, {"type": "audio/pcmu"}]),
    },
)
session_body = st.fixed_dictionaries(
    {},
    optional={
        "audio": st.fixed_dictionaries(
            {}, optional={"input": audio_input, "output": st.fixed_dictionaries({"language": languages})}
        ),
        "model": st.sampled_from(["gpt-realtime-translate", "dragoman-interpreter", "gpt-4o"]),
    },
)
#: Phrases and their pauses most (segments to translate), then anything an append can carry.
phrases = st.tuples(st.sampled_from([0.3, 0.6, 1.2, 2.0]), st.sampled_from([0.2, 0.8, 1.5])).map(
    lambda t: pcm(np.concatenate([tone(t[0]), silence(t[1])]))
)
payloads = st.one_of(phrases, phrases, audio_payloads(tone, silence))
event_ids = st.one_of(st.none(), st.text(max_size=8))


def _with_id(event: dict[str, Any], event_id: str | None) -> dict[str, Any]:
    return event if event_id is None else {**event, "event_id": event_id}


appends = st.builds(
    lambda a, e: _with_id({"type": "session.input_audio_buffer.append", "audio": a}, e), payloads, event_ids
)
updates = st.builds(
    lambda s, e: _with_id({"type": "session.update", "session": s}, e), session_body, event_ids
)
#: A close ends the run (the connection closes with `session.closed`): drawn less often.
events = st.one_of(updates, updates, appends, appends, appends, st.just({"type": "session.close"}))
#: The phrases a speaker says, as valid frames of their own: with the engines' ticks they
#: carry a session through whole segments, between the fuzzed frames.
spoken = st.builds(lambda event: Frame(dumps(event), bad=False, what="phrase"), appends)
engine_actions = st.tuples(
    # "run": a job taken and done at once, and "tick": each engine runs one, so that random
    # runs reach the later stages (a segment's final step, its MT final, its clauses said);
    # the rest split those steps and fail them.
    st.sampled_from(["tick", "tick", "tick", "run", "run", "take", "done", "fail", "piece"]),
    st.sampled_from(LANES),
    st.lists(st.sampled_from(HEARD), min_size=1, max_size=6).map(" ".join),
    st.sampled_from(["en", "de", None, "xx"]),
)
actions = st.lists(
    st.one_of(frames(events, TYPES), spoken, spoken, engine_actions, engine_actions), min_size=10, max_size=60
)

# -- the harness -----------------------------------------------------------------------------


class Fuzzed(Harness):
    """The unit tests' session and fakes, its engines driven by the fuzzer's actions."""

    def __init__(self, source: str) -> None:
        super().__init__(source=source)
        self.jobs: dict[str, Any] = {}
        self.closed_at: int | None = None
        #: A `session.close` was taken (answered with no error).
        self.close_taken = False

    def drain(self) -> list[dict[str, Any]]:
        new = super().drain()  # each validated as the SDK's RealtimeTranslationServerEvent
        for sent in new:
            strict_loads(json.dumps(sent))
            assert self.closed_at is None, f"{sent['type']} after session.closed"
            if sent["type"] == "session.closed":
                self.closed_at = len(self.events)
            if sent["type"] == "error":
                message = sent["error"]["message"]
                assert len(message) <= MAX_MESSAGE and "/srv" not in message and "Traceback" not in message
        return new

    def frame(self, frame: Frame) -> list[dict[str, Any]]:
        event = self.parser.parse(frame.raw)
        self.session.receive(event)
        out = self.drain()
        errors = [e for e in out if e["type"] == "error"]
        for error in errors:
            assert error["error"]["type"] == "invalid_request_error", (frame, error)
        if frame.bad:
            assert [e["type"] for e in out] == ["error"], (frame, out)
        elif not errors and isinstance(event, CloseSession):
            self.close_taken = True
        return out

    def engine(self, action: str, lane: str, text: str, language: str | None) -> None:
        job = self.jobs.get(lane)
        if job is None and action == "run":
            job = self.session.next_job(lane)
            self.drain()
            if job is None:
                return
            self.jobs[lane] = job
            action = "done"
        if job is None:
            if action == "take":
                taken = self.session.next_job(lane)
                if taken is not None:
                    self.jobs[lane] = taken
            self.drain()  # planning may answer without the engine
            return
        if action == "piece":
            if isinstance(job, SpeakJob):
                self.session.job_progress(job, b"\x01\x00" * (len(text) * 40 + 1))
        elif action == "fail":
            del self.jobs[lane]
            failure = EngineFailure("boom in /srv/x.py") if len(text) % 2 else RequestRejected("too long")
            self.session.job_failed(job, failure)
        else:
            del self.jobs[lane]
            self._done(job, text, language)
        self.drain()

    def _done(self, job: Any, text: str, language: str | None) -> None:
        if isinstance(job, StepJob):
            # An ASR that mostly keeps to the prefix it is given, so that steps agree.
            heard = text if language == "xx" else f"{job.request.prefix.strip()} {text}".strip()
            self.session.job_done(job, StepResult(text=heard, language=language))
        elif isinstance(job, MTJob):
            self.session.job_done(job, self.mt.draft(job.request))
        else:
            assert isinstance(job, SpeakJob)
            self.session.job_progress(job, b"\x00\x00" * (len(text) * 40 + 2))
            self.session.job_done(job, None)

    def settle(self, heard: str = "") -> None:
        """Finish every job the session has or makes, as well-behaved engines would: the ASR
        hears what it is told to (after any prefix it is given), the rest do their work."""
        for _ in range(400):
            busy = False
            for lane in LANES:
                job = self.jobs.pop(lane, None) or self.session.next_job(lane)
                self.drain()
                if job is None:
                    continue
                busy = True
                if isinstance(job, StepJob):
                    said = f"{job.request.prefix.strip()} {heard}".strip()
                    self.session.job_done(job, StepResult(text=said, language="en"))
                elif isinstance(job, SpeakJob):
                    self.session.job_progress(job, b"\x00\x00" * 2400)
                    self.session.job_done(job, None)
                else:
                    self._done(job, "", None)
                self.drain()
            if not busy:
                return
        raise AssertionError("the session keeps making work")


def run(harness: Fuzzed, steps: list[Any]) -> None:
    for step in steps:
        if harness.closed_at is not None:
            return  # the transport closes the connection with session.closed
        if isinstance(step, Frame):
            harness.frame(step)
        elif step[0] == "tick":  # every engine takes its next job and does it
            for lane in LANES:
                harness.engine("run", lane, *step[2:])
        else:
            harness.engine(*step)


def ends_well(harness: Fuzzed) -> None:
    """A closed session said `session.closed`; an open one still translates a phrase."""
    harness.settle()
    session = harness.session
    if harness.closed_at is not None or session.close_code is not None:
        assert harness.events[-1]["type"] == "session.closed" and session.close_code == CloseCode.NORMAL
        return
    assert not harness.close_taken, "session.close was taken, and session.closed never came"
    # Whatever the fuzz left: back to German with transcription, a pause to end any open
    # segment, then one phrase the fake engines hear and translate.
    update = {"audio": {"input": {"transcription": {"model": "whisper"}}, "output": {"language": "de"}}}
    harness.frame(Frame(json.dumps({"type": "session.update", "session": update}), False, "reset"))
    harness.frame(Frame(_append(silence(1.5)), False, "pause"))
    harness.settle()
    before = harness.text("session.output_transcript.delta")
    for _ in range(6):
        harness.frame(Frame(_append(tone(0.5)), False, "phrase"))
        harness.settle("the big house")
    harness.frame(Frame(_append(silence(1.5)), False, "pause"))
    harness.settle("the big house")
    translated = harness.text("session.output_transcript.delta")[len(before) :]
    assert "Haus" in translated, (before, translated)


def _append(audio: np.ndarray) -> str:
    return json.dumps({"type": "session.input_audio_buffer.append", "audio": pcm(audio)})


# -- the properties --------------------------------------------------------------------------


@FUZZ
@given(st.sampled_from(["en", "auto"]), actions)
@example("en", [Frame('{"type": "session.update", "session": ' + "{" * 40 + "}" * 40 + "}", True, "deep")])
@example(
    "en",
    [
        Frame(_append(tone(1.0)), False, "speech"),
        Frame('{"type": "session.close"}', False, "close"),
        ("take", ASR, "", None),
        ("fail", ASR, "x", None),
    ],
)
def test_translation_sessions_survive_any_client(source: str, steps: list[Any]) -> None:
    harness = Fuzzed(source)
    harness.drain()
    run(harness, steps)
    # What the fuzz reached (`--hypothesis-show-statistics`), before the well-behaved end.
    for kind in sorted({e["type"] for e in harness.events}):
        event(kind)
    ends_well(harness)


@settings(FUZZ, max_examples=max(FUZZ.max_examples // 3, 1))
@given(json_values)
def test_any_session_body_is_taken_or_refused_cleanly(body: Any) -> None:
    harness = Fuzzed("en")
    harness.drain()
    before = harness.session.config
    out = harness.frame(Frame(json.dumps({"type": "session.update", "session": body}), False, "body"))
    kinds = [e["type"] for e in out]
    assert kinds in (["session.updated"], ["error"]), out
    if kinds == ["error"]:
        assert harness.session.config == before, "a refused update changes nothing"
    ends_well(harness)
