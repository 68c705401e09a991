"""Every server event, in both generations, as the openai SDK's own types read it.

Each session output event is written by the protocol for a GA and a beta client,
and validated by the SDK's `RealtimeServerEvent` union of that generation: the
type must be one that generation has, every field must be one its types declare,
in their types. The session objects are also read back by the client parser, so
what the server reports is what a client would have set.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, TypedDict

import pytest

from dragoman.errors import EngineFailure, InvalidValue, RequestRejected
from dragoman.protocol.realtime import server_events
from dragoman.protocol.realtime.agent_events import agent_server_event, agent_wire_event
from dragoman.protocol.realtime.client_parsers import AgentClientParser, ClientParser
from dragoman.protocol.realtime.generation import Generation, default_input_rate
from dragoman.protocol.realtime.server_events import TranscriptionPartial, wire_event
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.config import (
    AgentConfig,
    ForcedFunction,
    FunctionTool,
    InputTranscription,
    TurnDetection,
)
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.config import SessionConfig
from dragoman.sessions.transcription import events as out
from dragoman.streaming.turns import SemanticVADConfig, ServerVADConfig
from tests.unit.realtime_sdk import validate

GENERATIONS = [Generation.GA, Generation.BETA]

# -- agent session events --------------------------------------------------------------

SPOKEN = agent.Message("item_2", "assistant", (agent.ContentPart("output_audio", transcript="Hello there"),))
WRITTEN = agent.Message("item_3", "assistant", (agent.ContentPart("output_text", text="Hello."),))
HEARD = agent.Message("item_1", "user", (agent.ContentPart("input_audio", transcript=None),))
TYPED = agent.Message("item_4", "user", (agent.ContentPart("input_text", text="What is the weather?"),))
SYSTEM = agent.Message("item_5", "system", (agent.ContentPart("input_text", text="Be brief."),))
CALL = agent.FunctionCall("item_6", "call_1", "get_weather", '{"city": "Rome"}', status="in_progress")
RESULT = agent.FunctionCallOutput("item_7", "call_1", '{"celsius": 21}')
ITEMS: list[agent.Item] = [SPOKEN, WRITTEN, HEARD, TYPED, SYSTEM, CALL, RESULT]

RESPONSES = [
    agent.Response("resp_1"),
    agent.Response("resp_1", "completed", output=(SPOKEN, CALL), usage=agent.Usage(120, 40), voice="marin"),
    agent.Response("resp_2", "cancelled", "turn_detected", output=(SPOKEN,)),
    agent.Response("resp_3", "cancelled", "client_cancelled", output_modalities=("text",)),
    agent.Response("resp_4", "incomplete", "max_output_tokens", max_output_tokens=64),
    agent.Response("resp_5", "failed", error=EngineFailure("out of memory in /srv/model")),
    agent.Response("resp_6", "failed", error=RequestRejected("Language 'xx' is not supported")),
]

CONFIGS = [
    AgentConfig(),
    AgentConfig(
        model="qwen2.5-1.5b-instruct",
        instructions="You are a helpful assistant.",
        output_modalities=("text",),
        voice="marin",
        speed=1.25,
        input_transcription=InputTranscription("whisper-base", "en", "names: Ada"),
        turn_detection=TurnDetection(ServerVADConfig(0.6, 200, 700), create_response=False),
        tools=(
            FunctionTool(
                "get_weather",
                "The weather in a city.",
                {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            ),
        ),
        tool_choice=ForcedFunction("get_weather"),
        max_output_tokens=512,
    ),
    AgentConfig(turn_detection=None, tool_choice="required"),
    *(
        AgentConfig(turn_detection=TurnDetection(SemanticVADConfig(eagerness), interrupt_response=False))
        for eagerness in ("low", "medium", "high", "auto")
    ),
]
#: Rates beyond OpenAI's 24 kHz are this server's extension: no SDK type allows them.
EXTENDED_CONFIGS = [AgentConfig(input_rate=16_000, output_rate=48_000)]


class InPart(TypedDict):
    """Where a content part's events point: its response, item and indexes."""

    response_id: str
    item_id: str
    output_index: int
    content_index: int


IN_PART: InPart = {"response_id": "resp_1", "item_id": "item_2", "output_index": 0, "content_index": 0}
AGENT_EVENTS: list[agent.ServerEvent] = [
    *(
        agent.SessionConfigured(created, "sess_1", config, "qwen-test")
        for config in CONFIGS
        for created in (True, False)
    ),
    speech.SpeechStarted(800, "item_1"),
    speech.SpeechStopped(2400, "item_1"),
    speech.TimeoutTriggered(2400, 8400, "item_2"),
    speech.Committed("item_1", None),
    speech.Cleared(),
    *(agent.ItemAdded(item, "item_0") for item in ITEMS),
    *(agent.ItemDone(item, None) for item in ITEMS),
    speech.Delta("item_1", "What is"),
    speech.Completed("item_1", "What is the weather?", 1.5),
    speech.Failed("item_1", EngineFailure("decoder crashed")),
    speech.Partial("item_1", "What is the", 7, 1.2),
    *(agent.ResponseCreated(response) for response in RESPONSES[:1]),
    *(agent.ResponseDone(response) for response in RESPONSES),
    agent.OutputItemAdded("resp_1", 0, dataclasses.replace(SPOKEN, status="in_progress", content=())),
    agent.OutputItemDone("resp_1", 0, SPOKEN),
    agent.OutputItemDone("resp_1", 1, CALL),
    agent.ContentPartAdded(**IN_PART, part=agent.ContentPart("output_audio", transcript="")),
    agent.ContentPartDone(**IN_PART, part=agent.ContentPart("output_audio", transcript="Hello there")),
    agent.ContentPartAdded(**IN_PART, part=agent.ContentPart("output_text", text="")),
    agent.ContentPartDone(**IN_PART, part=agent.ContentPart("output_text", text="Hello.")),
    agent.AudioDelta(**IN_PART, delta="AAAAAA=="),
    agent.AudioDone(**IN_PART),
    agent.AudioTranscriptDelta(**IN_PART, delta="Hello"),
    agent.AudioTranscriptDone(**IN_PART, transcript="Hello there"),
    agent.TextDelta(**IN_PART, delta="Hel"),
    agent.TextDone(**IN_PART, text="Hello."),
    agent.FunctionArgumentsDelta("resp_1", "item_6", 1, "call_1", '{"ci'),
    agent.FunctionArgumentsDone("resp_1", "item_6", 1, "call_1", "get_weather", '{"city": "Rome"}'),
    agent.OutputAudioStarted("resp_1"),
    agent.OutputAudioStopped("resp_1"),
    agent.OutputAudioCleared("resp_1"),
    *(agent.ItemRetrieved(item) for item in ITEMS),
    agent.ItemDeleted("item_1"),
    agent.ItemTruncated("item_3", 0, 1500),
    speech.Error(
        InvalidValue("speed must be between 0.25 and 1.5.", param="session.audio.output.speed"), "evt_1"
    ),
    speech.Error(EngineFailure("event writing failed")),
]


def _members(union: Any) -> set[type[Any]]:
    return {member for alias in typing.get_args(union) for member in (typing.get_args(alias) or (alias,))}


def test_every_agent_server_event_is_covered() -> None:
    assert {type(event) for event in AGENT_EVENTS} == _members(agent.ServerEvent)


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("event", AGENT_EVENTS, ids=lambda event: type(event).__name__)
def test_agent_events_are_the_sdks_events(event: agent.ServerEvent, generation: Generation) -> None:
    if isinstance(event, speech.TimeoutTriggered) and generation is Generation.BETA:
        pytest.skip("beta has no idle timeout: a beta session never sets one (test_idle_timeout.py)")
    wire = agent_wire_event(event, generation)
    if isinstance(event, agent.ItemDone) and generation is Generation.BETA:
        assert wire is None, "beta has no conversation.item.done"
        return
    assert wire is not None
    if isinstance(event, speech.Partial):
        assert TranscriptionPartial.model_validate(wire).text == event.text
        return
    validate(wire, generation)
    assert wire["event_id"].startswith("event_")


@pytest.mark.parametrize(
    ("event", "ga", "beta"),
    [
        (agent.ItemAdded(SPOKEN, None), "conversation.item.added", "conversation.item.created"),
        (agent.AudioDelta(**IN_PART, delta=""), "response.output_audio.delta", "response.audio.delta"),
        (agent.AudioDone(**IN_PART), "response.output_audio.done", "response.audio.done"),
        (
            agent.AudioTranscriptDelta(**IN_PART, delta=""),
            "response.output_audio_transcript.delta",
            "response.audio_transcript.delta",
        ),
        (
            agent.AudioTranscriptDone(**IN_PART, transcript=""),
            "response.output_audio_transcript.done",
            "response.audio_transcript.done",
        ),
        (agent.TextDelta(**IN_PART, delta=""), "response.output_text.delta", "response.text.delta"),
        (agent.TextDone(**IN_PART, text=""), "response.output_text.done", "response.text.done"),
    ],
)
def test_event_names_follow_the_generation(event: agent.ServerEvent, ga: str, beta: str) -> None:
    assert (agent_wire_event(event, Generation.GA) or {})["type"] == ga
    assert (agent_wire_event(event, Generation.BETA) or {})["type"] == beta


@pytest.mark.parametrize("generation", GENERATIONS)
def test_items_keep_their_content_in_the_generations_names(generation: Generation) -> None:
    for item in (SPOKEN, WRITTEN, TYPED, HEARD):
        wire = agent_wire_event(agent.ItemAdded(item, None), generation)
        assert wire is not None
        (part,) = wire["item"]["content"]
        (source,) = item.content
        if source.type.endswith("audio"):
            assert part == {"type": part["type"], "transcript": source.transcript}
        else:
            assert part == {"type": part["type"], "text": source.text}
        expected: str = source.type
        if generation is Generation.BETA:
            expected = expected.replace("output_", "")
        assert part["type"] == expected


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("response", RESPONSES, ids=lambda response: f"{response.status}-{response.reason}")
def test_response_done_reports_status_reason_and_output(
    response: agent.Response, generation: Generation
) -> None:
    wire = agent_wire_event(agent.ResponseDone(response), generation)
    assert wire is not None
    body = wire["response"]
    assert body["id"] == response.id and body["status"] == response.status
    details = body["status_details"]
    if response.status == "in_progress":
        assert details is None
    else:
        assert details["type"] == response.status and details["reason"] == response.reason
    assert [item["id"] for item in body["output"]] == [item.id for item in response.output]
    if response.usage is not None:
        used = response.usage
        assert body["usage"]["total_tokens"] == used.input_tokens + used.output_tokens
    if isinstance(response.error, EngineFailure):
        assert response.error.error_id in details["error"]["message"]
        assert "/srv" not in json.dumps(wire) and "memory" not in json.dumps(wire)
    modalities = body["output_modalities" if generation is Generation.GA else "modalities"]
    assert ("audio" in modalities) == ("audio" in response.output_modalities)


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("config", CONFIGS + EXTENDED_CONFIGS, ids=range(len(CONFIGS) + 1))
def test_agent_session_object_reads_back_as_the_same_config(
    config: AgentConfig, generation: Generation
) -> None:
    """What `session.updated` reports, sent back as an update, sets exactly that config."""
    wire = agent_wire_event(agent.SessionConfigured(False, "sess_1", config, "qwen-test"), generation)
    assert wire is not None and wire["type"] == "session.updated"
    parser = AgentClientParser(generation)
    update = parser.parse(json.dumps({"type": "session.update", "session": wire["session"]}))
    assert isinstance(update, agent.UpdateSession), update
    assert parser.generation is generation
    expected = config
    if generation is Generation.GA:
        # The model reported is the engine serving the session, whatever the client named.
        expected = dataclasses.replace(config, model="qwen-test")
    else:
        # Beta's session object has no model of ours to report.
        expected = dataclasses.replace(config, model=None)
    assert dataclasses.replace(AgentConfig(), **update.values) == expected


# -- transcription session events ------------------------------------------------------

TRANSCRIPTION_CONFIGS = [
    SessionConfig(),
    SessionConfig(
        model="whisper-1",
        language="en",
        prompt="names",
        input_rate=24_000,
        turn_detection=ServerVADConfig(0.4, 100, 600),
        chunk_seconds=1.5,
        unfixed_chunks=3,
        unfixed_tokens=4,
    ),
    *(SessionConfig(turn_detection=SemanticVADConfig(eagerness)) for eagerness in ("low", "high", "auto")),
]
TRANSCRIPTION_EVENTS: list[out.ServerEvent] = [
    *(
        out.SessionConfigured(True, "sess_1", config, "whisper-base", 30.0)
        for config in TRANSCRIPTION_CONFIGS
    ),
    out.SessionConfigured(False, "sess_1", SessionConfig(), "whisper-base", 30.0),
    out.Committed("item_2", "item_1"),
    out.Cleared(),
    out.SpeechStarted(500, "item_1"),
    out.SpeechStopped(4000, "item_1"),
    out.TimeoutTriggered(4000, 9000, "item_2"),
    out.Delta("item_1", "Hello"),
    out.Completed("item_1", "Hello world", 3.5),
    out.Failed("item_1", RequestRejected("Language 'xx' is not supported")),
    out.Partial("item_1", "Hello wor", 5, 2.0),
    out.Error(InvalidValue("bad", param="session.mstar.unfixed_tokens"), "evt_1"),
    out.Error(EngineFailure("step failed")),
]


def test_every_transcription_server_event_is_covered() -> None:
    assert {type(event) for event in TRANSCRIPTION_EVENTS} == _members(out.ServerEvent)


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("event", TRANSCRIPTION_EVENTS, ids=lambda event: type(event).__name__)
def test_transcription_events_are_the_sdks_events(event: out.ServerEvent, generation: Generation) -> None:
    if isinstance(event, out.SessionConfigured):
        # At the generation's own rate: others are this server's extension, in no SDK type.
        config = dataclasses.replace(event.config, input_rate=default_input_rate(generation))
        event = dataclasses.replace(event, config=config)
    if isinstance(event, out.TimeoutTriggered) and generation is Generation.BETA:
        pytest.skip("beta has no idle timeout: a beta session never sets one (test_idle_timeout.py)")
    wire = wire_event(event, generation)
    if isinstance(event, out.Partial):
        # This server's extension, in no SDK union.
        assert TranscriptionPartial.model_validate(wire).text == event.text
        return
    validate(wire, generation)


@pytest.mark.parametrize("generation", GENERATIONS)
@pytest.mark.parametrize("config", TRANSCRIPTION_CONFIGS, ids=range(len(TRANSCRIPTION_CONFIGS)))
def test_transcription_session_object_reads_back_as_the_same_config(
    config: SessionConfig, generation: Generation
) -> None:
    wire = wire_event(out.SessionConfigured(False, "sess_1", config, "whisper-base", 30.0), generation)
    kind = "session.update" if generation is Generation.GA else "transcription_session.update"
    update = ClientParser(generation).parse(json.dumps({"type": kind, "session": wire["session"]}))
    assert isinstance(update, out.UpdateSession), update
    # The model reported is the engine serving the session, whatever the client named; beta's
    # type names only OpenAI's models, so beta is told none.
    expected = dataclasses.replace(config, model="whisper-base" if generation is Generation.GA else None)
    values = dict(update.values)
    assert values.pop("partials") is False, "the session's own flag, read back too"
    assert SessionConfig().patched(values, cap=30.0) == expected


def test_semantic_vad_is_reported_as_the_sdks_semantic_vad() -> None:
    semantic = SemanticVADConfig("high")
    transcription_wire = wire_event(
        out.SessionConfigured(
            False, "s", SessionConfig(input_rate=24_000, turn_detection=semantic), "m", 30.0
        ),
        Generation.GA,
    )
    model: Any = validate(transcription_wire, Generation.GA)
    detection = model.session.audio.input.turn_detection
    assert type(detection).__name__ == "SemanticVad" and detection.eagerness == "high"
    config = AgentConfig(turn_detection=TurnDetection(semantic, create_response=False))
    agent_wire = agent_wire_event(agent.SessionConfigured(False, "s", config, "m"), Generation.GA)
    assert agent_wire is not None
    agent_model: Any = validate(agent_wire, Generation.GA)
    detection = agent_model.session.audio.input.turn_detection
    assert type(detection).__name__ == "SemanticVad"
    assert (detection.eagerness, detection.create_response, detection.interrupt_response) == (
        "high",
        False,
        True,
    )


def test_item_failures_quote_no_client_event() -> None:
    wire = server_events.wire_event(out.Failed("item_1", RequestRejected("no")), Generation.GA)
    assert "event_id" not in wire["error"]
    assert wire["error"]["type"] == "invalid_request_error"


def test_ga_writes_the_session_type_of_its_endpoint() -> None:
    agent_wire = agent_server_event(agent.SessionConfigured(True, "s", AgentConfig(), "m"), Generation.GA)
    assert agent_wire is not None
    transcription_wire = wire_event(
        out.SessionConfigured(True, "s", SessionConfig(), "m", 30.0), Generation.GA
    )
    assert agent_wire.wire()["session"]["type"] == "realtime"
    assert transcription_wire["session"]["type"] == "transcription"
