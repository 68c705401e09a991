"""A property-based fuzzer for the Realtime protocol: transcription and agent sessions, in-process.

Client frames (valid, mutated and hostile; `fuzz_strategies`) and engine outcomes (steps,
streamed pieces, failures) are interleaved in any order, through the real parsers, the
real sessions and the connections' real wire writers (`RealtimeCodec`, `AgentCodec`).
The properties:

- nothing raises;
- every frame the server writes is UTF-8 text, and a valid event of the client's
  generation by the openai SDK's own types;
- every hostile frame is answered with one `error` event, and no client frame ever with a
  `server_error`;
- afterwards, the session still serves: a session update, then an append and a commit
  that is transcribed (transcription), or an item and a response (agent).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dragoman.audio.rates import SUPPORTED_RATES
from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, PrefixMode, StepResult
from dragoman.engines.llm.base import Finished, TextPiece, ToolCall, ToolCallPiece
from dragoman.errors import EngineFailure, InvalidValue, RequestRejected
from dragoman.protocol.realtime.client_parsers import AgentClientParser, ClientParser, default_input_rate
from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.jobs import ASR, LANES, LLM, LLMJob, SpeechJob
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.agent.session import AgentSession
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import StepJob
from dragoman.sessions.transcription.session import TranscriptionSession
from dragoman.transports.websocket.agent import AgentCodec
from dragoman.transports.websocket.realtime import RealtimeCodec
from tests.unit.fakes import EnergyVAD, WordTokenizer
from tests.unit.fuzz_strategies import FUZZ, Frame, audio_payloads, frames, hostile, strict_loads
from tests.unit.realtime_sdk import validate
from tests.unit.test_transcription_session import b64, silence, tone

#: The item cap of the fuzzed sessions: small, so that appends reach it.
CAP_SECONDS = 3.0
#: Longest error message a client is sent, with room for the ellipsis.
MAX_MESSAGE = 600


def profile() -> EngineProfile:
    return EngineProfile(
        name="fake-asr",
        capabilities=ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT),
        tokenizer=WordTokenizer(),
        max_item_seconds=CAP_SECONDS,
    )


def turn_model(audio: np.ndarray) -> float:
    """semantic_vad's model: sure when the turn is long, unsure when short."""
    return 0.9 if len(audio) > 16_000 else 0.2


# -- event strategies ----------------------------------------------------------------------

event_id = st.one_of(st.none(), st.text(max_size=10).map(lambda t: "evt_" + t))
server_vad = st.fixed_dictionaries(
    {"type": st.just("server_vad")},
    optional={
        "threshold": st.floats(0, 1),
        "prefix_padding_ms": st.integers(0, 1000),
        "silence_duration_ms": st.integers(0, 2000),
    },
)
semantic_vad = st.fixed_dictionaries(
    {"type": st.just("semantic_vad")},
    optional={"eagerness": st.sampled_from(["low", "medium", "high", "auto"])},
)
turn_detection = st.one_of(st.none(), server_vad, semantic_vad)
transcription = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["whisper-1", "gpt-4o-transcribe"]),
        "language": st.sampled_from(["en", "de", ""]),
        "prompt": st.text(max_size=20),
    },
)
mstar = st.fixed_dictionaries(
    {},
    optional={
        "chunk_seconds": st.floats(0, CAP_SECONDS),
        "unfixed_chunks": st.integers(0, 4),
        "unfixed_tokens": st.integers(0, 8),
    },
)
ga_format = st.sampled_from([16_000, 24_000, 48_000]).map(lambda rate: {"type": "audio/pcm", "rate": rate})
payload = audio_payloads(tone, silence)


def _event(type_: str, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"type": st.just(type_), **fields}, optional={"event_id": event_id})


append = _event("input_audio_buffer.append", audio=payload)
#: A turn spoken (speech, then a pause), as a valid frame of its own: with the engines' ticks
#: it takes a session through whole turns between the fuzzed frames.
spoken = st.tuples(st.sampled_from([0.3, 0.6, 1.2]), st.sampled_from([0.3, 0.8, 1.5])).map(
    lambda t: Frame(
        json.dumps(
            {"type": "input_audio_buffer.append", "audio": b64(np.concatenate([tone(t[0]), silence(t[1])]))}
        ),
        bad=False,
        what="turn",
    )
)
buffer_events = st.one_of(
    append,
    append,
    append,
    _event("input_audio_buffer.commit"),
    _event("input_audio_buffer.clear"),
)
transcription_events = st.one_of(
    _event(
        "transcription_session.update",
        session=st.fixed_dictionaries(
            {},
            optional={
                "input_audio_format": st.just("pcm16"),
                "input_audio_transcription": st.none() | transcription,
                "turn_detection": turn_detection,
                "mstar": mstar,
            },
        ),
    ),
    _event(
        "session.update",
        session=st.fixed_dictionaries(
            {"type": st.just("transcription")},
            optional={
                "audio": st.fixed_dictionaries(
                    {},
                    optional={
                        "input": st.fixed_dictionaries(
                            {},
                            optional={
                                "format": ga_format,
                                "transcription": st.none() | transcription,
                                "turn_detection": turn_detection,
                            },
                        )
                    },
                ),
                "mstar": mstar,
            },
        ),
    ),
    buffer_events,
    buffer_events,
)
TRANSCRIPTION_TYPES = (
    "transcription_session.update",
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
)

agent_turns = st.one_of(
    st.none(),
    server_vad.flatmap(
        lambda vad: st.fixed_dictionaries(
            {}, optional={"create_response": st.booleans(), "interrupt_response": st.booleans()}
        ).map(lambda flags: {**vad, **flags})
    ),
    semantic_vad,
)
tool = st.fixed_dictionaries(
    {"type": st.just("function"), "name": st.sampled_from(["get_weather", "lookup"])},
    optional={
        "description": st.text(max_size=20),
        "parameters": st.just({"type": "object", "properties": {"city": {"type": "string"}}}),
    },
)
modalities = st.sampled_from([["audio"], ["text"]])
voice = st.sampled_from(["alloy", "joe", "zz"])
common = {
    "instructions": st.text(max_size=30),
    "tools": st.lists(tool, max_size=2),
    "tool_choice": st.sampled_from(["auto", "none", "required"]),
}
ga_agent_session = st.fixed_dictionaries(
    {"type": st.just("realtime")},
    optional={
        **common,
        "output_modalities": modalities,
        "max_output_tokens": st.one_of(st.integers(1, 4096), st.just("inf")),
        "audio": st.fixed_dictionaries(
            {},
            optional={
                "input": st.fixed_dictionaries(
                    {},
                    optional={
                        "format": ga_format,
                        "transcription": st.none() | transcription,
                        "turn_detection": agent_turns,
                    },
                ),
                "output": st.fixed_dictionaries(
                    {}, optional={"format": ga_format, "voice": voice, "speed": st.floats(0.25, 1.5)}
                ),
            },
        ),
    },
)
beta_agent_session = st.fixed_dictionaries(
    {},
    optional={
        **common,
        "modalities": st.sampled_from([["text"], ["text", "audio"]]),
        "voice": voice,
        "input_audio_format": st.just("pcm16"),
        "output_audio_format": st.just("pcm16"),
        "input_audio_transcription": st.none() | transcription,
        "turn_detection": agent_turns,
        "max_response_output_tokens": st.one_of(st.integers(1, 4096), st.just("inf")),
    },
)
part_text = st.text(max_size=30)
message = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "role": st.sampled_from(["user", "system"]),
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("input_text"), "text": part_text}),
                min_size=1,
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "role": st.just("assistant"),
            "content": st.lists(
                st.fixed_dictionaries({"type": st.sampled_from(["output_text", "text"]), "text": part_text}),
                min_size=1,
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call_output"),
            "call_id": st.sampled_from(["call_x", "call_unknown"]),
            "output": st.text(max_size=20),
        }
    ),
)
agent_events = st.one_of(
    _event("session.update", session=st.one_of(ga_agent_session, beta_agent_session)),
    buffer_events,
    buffer_events,
    st.fixed_dictionaries(
        {"type": st.just("conversation.item.create"), "item": message},
        optional={"previous_item_id": st.sampled_from(["root", "item_nope"]), "event_id": event_id},
    ),
    _event("response.create")
    | st.fixed_dictionaries(
        {
            "type": st.just("response.create"),
            "response": st.fixed_dictionaries(
                {},
                optional={
                    **common,
                    "output_modalities": modalities,
                    "voice": voice,
                    "max_output_tokens": st.integers(1, 4096),
                    "conversation": st.just("auto"),
                },
            ),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("response.cancel")}, optional={"response_id": st.just("resp_nope")}
    ),
    _event("output_audio_buffer.clear"),
)
AGENT_TYPES = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "response.create",
    "response.cancel",
    "output_audio_buffer.clear",
)

#: What the engines do between client frames: take a lane's job, stream a piece of it, end it,
#: fail it; or "tick": every lane takes its next job, streams a piece and ends it, so that
#: random runs reach responses and what happens to them (deltas, cancels, barge-in).
engine_actions = st.tuples(
    st.sampled_from(["tick", "tick", "take", "piece", "done", "fail"]),
    st.sampled_from(LANES),
    st.one_of(st.text(max_size=20), st.sampled_from([" hello there.", " Ok. Fine.", ""])),
)


def actions(
    events: st.SearchStrategy[dict[str, Any]], types: tuple[str, ...]
) -> st.SearchStrategy[list[Any]]:
    frame = frames(events, types)
    return st.lists(st.one_of(frame, frame, spoken, engine_actions, engine_actions), min_size=4, max_size=40)


# -- the harness ---------------------------------------------------------------------------


def sdk_view(wire: Any, generation: Generation) -> Any:
    """The event as the SDK's types can judge it. They allow audio/pcm at 24 kHz only (GA), and
    "pcm16" only (beta); other rates are this server's extension (`protocol/realtime/generation.py`),
    written as `{"type": "audio/pcm", "rate": N}` in either generation, anywhere in an event."""
    if isinstance(wire, list):
        return [sdk_view(value, generation) for value in wire]
    if not isinstance(wire, dict):
        return wire
    if wire.get("type") == "audio/pcm" and "rate" in wire:
        assert wire["rate"] in SUPPORTED_RATES, wire
        return "pcm16" if generation is Generation.BETA else {**wire, "rate": 24_000}
    return {key: sdk_view(value, generation) for key, value in wire.items()}


class Harness:
    """A session behind its connection's codec; checks every frame the server writes."""

    def __init__(self, session: Any, codec: Any, lanes: tuple[str, ...], session_type: str) -> None:
        self.session = session
        self.session_type = session_type
        self.codec = codec
        self.lanes = lanes
        self.jobs: dict[str, Any] = {}
        self.events()

    @property
    def generation(self) -> Generation:
        generation: Generation = self.codec.parser.generation
        return generation

    def events(self) -> list[dict[str, Any]]:
        out = []
        for event in self.session.events_to_send():
            frame = self.codec.write(event)
            if frame is None:
                continue
            assert isinstance(frame, str)
            frame.encode("utf-8")  # a text frame must be sendable
            assert "/srv/" not in frame, "no server path or exception text reaches a client"
            wire = strict_loads(frame)
            if wire["type"].startswith("mstar."):  # this server's own extension events
                assert wire["type"] == "mstar.transcription.partial" and isinstance(wire["text"], str)
            else:
                validate(sdk_view(wire, self.generation), self.generation)
            if wire["type"] == "error":
                assert len(wire["error"]["message"]) <= MAX_MESSAGE, wire
            out.append(wire)
        return out

    def frame(self, frame: Frame) -> list[dict[str, Any]]:
        self.session.receive(self.codec.parse(frame.raw))
        events = self.events()
        errors = [e for e in events if e["type"] == "error"]
        for error in errors:
            assert error["error"]["type"] == "invalid_request_error", error
        if frame.bad:
            assert [e["type"] for e in events] == ["error"], (frame, events)
        return events

    def send(self, type_: str, **body: Any) -> list[dict[str, Any]]:
        return self.frame(Frame(json.dumps({"type": type_, **body}), bad=False, what="final"))

    def engine(self, action: str, lane: str, text: str) -> None:
        if lane not in self.lanes:
            return
        job = self.jobs.get(lane)
        if job is None:
            taken = self.session.next_job(lane) if action == "take" else None
            if taken is not None:
                self.jobs[lane] = taken
            self.events()  # planning may answer without the engine (the driver flushes it too)
            return
        if action == "piece" and not isinstance(job, StepJob):
            self.session.job_progress(job, self._piece(job, text))
        elif action == "done":
            self._done(job, text)
        elif action == "fail":
            del self.jobs[lane]
            error = EngineFailure("boom in /srv/x.py") if len(text) % 2 else RequestRejected("Language 'xx'")
            self.session.job_failed(job, error)
        self.events()

    def _piece(self, job: Any, text: str) -> Any:
        if isinstance(job, SpeechJob):
            return b"\x01\x00" * (len(text) * 40)
        if text.startswith(" Ok"):
            return ToolCallPiece(ToolCall("call_x", "get_weather", '{"city": "Paris"}'))
        return TextPiece(text)

    def _done(self, job: Any, text: str) -> None:
        lane = next(lane for lane, held in self.jobs.items() if held is job)
        del self.jobs[lane]
        if isinstance(job, StepJob):
            self.session.job_done(job, StepResult(text=text, language="en"))
        elif isinstance(job, LLMJob):
            self.session.job_done(job, Finished("stop", input_tokens=3, output_tokens=2, cached_tokens=0))
        else:
            self.session.job_done(job, None)

    def settle(self) -> None:
        """Finish every job the session has or makes, as well-behaved engines would."""
        for _ in range(60):
            busy = False
            for lane in self.lanes:
                if lane not in self.jobs:
                    self.engine("take", lane, "")
                job = self.jobs.get(lane)
                if job is None:
                    continue
                busy = True
                if isinstance(job, LLMJob):
                    self.session.job_progress(job, TextPiece("Sure. "))
                elif isinstance(job, SpeechJob):
                    self.session.job_progress(job, b"\x00\x00" * 2400)
                self.engine("done", lane, " fine")
            if not busy:
                return
        raise AssertionError("the session keeps making work")


def transcription_harness(generation: Generation) -> Harness:
    config = SessionConfig.defaults(TranscriptionSettings(), default_input_rate(generation))
    session = TranscriptionSession("sess_fuzz", profile(), config, EnergyVAD, lambda: turn_model)
    return Harness(session, RealtimeCodec(ClientParser(generation)), (ASR,), "transcription")


def agent_harness(generation: Generation) -> Harness:
    limits = AgentLimits(
        model_name="fake-llm", speech=SessionConfig.defaults(TranscriptionSettings(), 24_000)
    )
    voices = {"alloy": "hibari", "hibari": "hibari", "joe": "joe"}

    def voice(name: str | None) -> str:
        if name is None:
            return "hibari"
        if name not in voices:
            raise InvalidValue(f"unknown voice {name[:20]!r}", param="session.audio.output.voice")
        return voices[name]

    session = AgentSession(
        "sess_fuzz", profile(), AgentConfig(), limits, EnergyVAD, voice, turn_model_factory=lambda: turn_model
    )
    return Harness(session, AgentCodec(AgentClientParser(generation)), LANES, "realtime")


def run(harness: Harness, steps: list[Any]) -> None:
    for step in steps:
        if isinstance(step, Frame):
            harness.frame(step)
        elif step[0] == "tick":
            for lane in harness.lanes:
                for action in ("take", "piece", "done"):
                    harness.engine(action, lane, step[2])
        else:
            harness.engine(*step)


def still_transcribes(harness: Harness) -> None:
    harness.settle()
    assert [e["type"] for e in harness.send("input_audio_buffer.clear")] == ["input_audio_buffer.cleared"]
    session = {"input_audio_format": "pcm16", "turn_detection": None, "input_audio_transcription": None}
    assert [e["type"] for e in harness.send("transcription_session.update", session=session)] == [
        "transcription_session.updated"
    ]
    assert harness.send("input_audio_buffer.append", audio=b64(tone(1.0))) == []
    assert [e["type"] for e in harness.send("input_audio_buffer.commit")] == ["input_audio_buffer.committed"]
    job = harness.session.next_job()
    assert job is not None and job.final and len(job.request.audio) == 16_000
    harness.session.job_done(job, StepResult(text=" still here", language="en"))
    assert harness.events()[-1]["transcript"] == "still here"


def still_answers(harness: Harness) -> None:
    agent: AgentSession = harness.session
    harness.settle()
    # A turn may be open, and an early answer held for it: the clear drops both.
    assert [e["type"] for e in harness.send("input_audio_buffer.clear")] == ["input_audio_buffer.cleared"]
    for _ in range(4):
        harness.settle()
        if agent.response is None:
            break
        assert [e for e in harness.send("response.cancel") if e["type"] == "error"] == []
    assert agent.response is None
    if harness.generation is Generation.GA:
        update = harness.send(
            "session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
    else:
        update = harness.send("session.update", session={"turn_detection": None})
    assert [e["type"] for e in update] == ["session.updated"]
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Still there?"}]}
    # Beta has no conversation.item.done.
    lifecycle = (
        ["conversation.item.added", "conversation.item.done"]
        if harness.generation is Generation.GA
        else ["conversation.item.created"]
    )
    assert [e["type"] for e in harness.send("conversation.item.create", item=item)] == lifecycle
    assert [e for e in harness.send("response.create") if e["type"] == "error"] == []
    job = agent.next_job(LLM)
    assert isinstance(job, LLMJob) and job.request.messages[-1].content == "Still there?"


# -- the properties --------------------------------------------------------------------------

generations = st.sampled_from([Generation.BETA, Generation.GA])


#: A session update to start with (None: the server's defaults), so that turns are fuzzed too.
first_update = st.one_of(st.none(), st.sampled_from(["server_vad", "semantic_vad"]))


def turns_on(harness: Harness, kind: str | None) -> None:
    if kind is None:
        return
    session: dict[str, Any] = {"turn_detection": {"type": kind}}
    if harness.generation is Generation.GA:
        session = {"type": harness.session_type, "audio": {"input": session}}
    elif harness.session_type == "transcription":
        update = harness.send("transcription_session.update", session=session)
        assert [e["type"] for e in update] == ["transcription_session.updated"]
        return
    assert [e["type"] for e in harness.send("session.update", session=session)] == ["session.updated"]


@FUZZ
@given(generations, first_update, actions(transcription_events, TRANSCRIPTION_TYPES))
@example(
    Generation.GA,
    None,
    [Frame('{"type": "session.update", "session": ' + "[" * 50_000 + "]" * 50_000 + "}", True, "deep")],
)
@example(
    Generation.BETA,
    None,
    [Frame('{"type": "input_audio_buffer.append", "audio": "x\\ud800"}', True, "surrogate")],
)
def test_transcription_sessions_survive_any_client(
    generation: Generation, first: str | None, steps: list[Any]
) -> None:
    harness = transcription_harness(generation)
    turns_on(harness, first)
    run(harness, steps)
    still_transcribes(harness)


@FUZZ
@given(generations, first_update, actions(agent_events, AGENT_TYPES))
@example(
    Generation.GA,
    None,
    [Frame('{"type": "session.update", "session": ' + "{" * 40 + "}" * 40 + "}", True, "deep")],
)
def test_agent_sessions_survive_any_client(
    generation: Generation, first: str | None, steps: list[Any]
) -> None:
    harness = agent_harness(generation)
    turns_on(harness, first)
    run(harness, steps)
    still_answers(harness)


@settings(FUZZ, max_examples=max(FUZZ.max_examples // 3, 1))
@given(generations, hostile(TRANSCRIPTION_TYPES))
def test_hostile_frames_are_invalid_request_errors(generation: Generation, frame: Frame) -> None:
    for harness in (transcription_harness(generation), agent_harness(generation)):
        (error,) = harness.frame(frame)
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"


# -- the corpus: cases that once failed ---------------------------------------------------------


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
@pytest.mark.parametrize("make", [transcription_harness, agent_harness])
def test_deep_nesting_is_the_clients_fault(make: Any, depth: int) -> None:
    # It was a RecursionError, answered as a server_error.
    harness = make(Generation.GA)
    (error,) = harness.frame(
        Frame('{"type": "session.update", "session": ' + "[" * depth + "]" * depth + "}", True, "deep")
    )
    assert error["error"]["type"] == "invalid_request_error"
    assert "deeper than 32 levels" in error["error"]["message"]


def test_a_lone_surrogate_is_refused_before_it_is_echoed() -> None:
    # A prompt of "\ud800" came back in session.updated, which no UTF-8 text frame can carry.
    harness = transcription_harness(Generation.BETA)
    raw = '{"type": "transcription_session.update", "session": {"input_audio_transcription": {"prompt": "\\ud800"}}}'
    (error,) = harness.frame(Frame(raw, True, "surrogate"))
    assert "lone surrogate" in error["error"]["message"]
    # A surrogate pair is a character, and fine.
    raw = raw.replace("\\ud800", "\\ud83d\\ude00")
    (updated,) = harness.frame(Frame(raw, False, "pair"))
    assert updated["session"]["input_audio_transcription"]["prompt"] == "😀"


@pytest.mark.parametrize("idle", ["[]", "false", "3", "1e9", '"10000"'])
@pytest.mark.parametrize("make", [transcription_harness, agent_harness])
def test_a_beta_clients_idle_timeout_is_ignored_whatever_it_holds(make: Any, idle: str) -> None:
    # Beta has no idle_timeout_ms, so it is not read; it was still checked, and a list or a
    # bool raised out of the parser (a server error for the client's own field).
    harness = make(Generation.BETA)
    update = "transcription_session.update" if harness.session_type == "transcription" else "session.update"
    raw = f'{{"type": "{update}", "session": {{"turn_detection": {{"idle_timeout_ms": {idle}}}}}}}'
    (updated,) = harness.frame(Frame(raw, False, "beta idle"))
    assert (
        updated["type"].endswith("updated") and "idle_timeout_ms" not in updated["session"]["turn_detection"]
    )


def test_a_clear_drops_an_early_start_held_for_the_cleared_turn() -> None:
    # The held answer stayed the session's response for ever: with interrupt_response off, no
    # later turn was ever answered (and response.cancel said there was none).
    from tests.unit.test_agent_session import RATE as AGENT_RATE
    from tests.unit.test_agent_session import early_agent, pause_then_provisional

    agent = early_agent()
    turns = {"type": "server_vad", "interrupt_response": False}
    agent.send("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turns}}})
    pause_then_provisional(agent, "Book a table")
    held: LLMJob = agent.job(LLM)
    assert agent.session.response is not None, "an answer is held"
    assert [e["type"] for e in agent.send("input_audio_buffer.clear")] == ["input_audio_buffer.cleared"]
    assert agent.session.response is None and held.cancel.cancelled
    agent.send(
        "input_audio_buffer.append",
        audio=b64(np.concatenate([tone(1.0, AGENT_RATE), silence(0.8, AGENT_RATE)])),
    )
    agent.transcribe("Call Anna")
    assert not [e for e in agent.log if e["type"].startswith("response.")], (
        "the client never saw the held one"
    )
    job: LLMJob = agent.job(LLM)
    assert job.request.messages[-1].content == "Call Anna"
