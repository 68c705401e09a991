"""Client events as the openai SDK writes them, and what the parsers make of them.

Valid events are written by the SDK's own connection objects (GA `client.realtime`,
beta `client.beta.realtime`) and parsed into session events; malformed ones must
come back as an `error` event, itself valid for the SDK, with the right code and
`param` and quoting the client's `event_id` where the frame had a readable one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dragoman.protocol.realtime.agent_events import agent_wire_event
from dragoman.protocol.realtime.client_events import MAX_TEXT_CHARS
from dragoman.protocol.realtime.client_parsers import AgentClientParser, ClientParser
from dragoman.protocol.realtime.fields import MAX_EVENT_ID_CHARS
from dragoman.protocol.realtime.generation import Generation
from dragoman.protocol.realtime.server_events import wire_event
from dragoman.protocol.realtime.session_fields import (
    MAX_INSTRUCTIONS_CHARS,
    MAX_LANGUAGE_CHARS,
    MAX_PROMPT_CHARS,
    MAX_TOOLS,
    MAX_VOICE_CHARS,
)
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.config import (
    AgentConfig,
    ForcedFunction,
    FunctionTool,
    InputTranscription,
    TurnDetection,
)
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.config import NoiseReductionUpdate
from dragoman.sessions.transcription import events as transcription
from dragoman.streaming.turns import SemanticVADConfig, ServerVADConfig
from tests.unit.realtime_sdk import Sent, validate

GA, BETA = Generation.GA, Generation.BETA
TRANSCRIPTION = {"model": "whisper-1", "language": "en", "prompt": "names: Ada"}
VAD = {"type": "server_vad", "threshold": 0.3, "prefix_padding_ms": 200, "silence_duration_ms": 700}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
WEATHER_TOOL = FunctionTool(WEATHER["name"], WEATHER["description"], WEATHER["parameters"])  # type: ignore[arg-type]

# -- transcription sessions ----------------------------------------------------------


def test_ga_transcription_update_from_the_sdk() -> None:
    sent = Sent(GA)
    audio_in = {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": TRANSCRIPTION,
        "turn_detection": VAD,
        "noise_reduction": {"type": "near_field"},
    }
    sent.conn.session.update(
        session={
            "type": "transcription",
            "audio": {"input": audio_in},
            "include": ["item.input_audio_transcription.logprobs"],
        },
        event_id="evt_1",
    )
    parser = ClientParser(BETA)
    event = parser.parse(sent.last())
    vad = ServerVADConfig(VAD["threshold"], VAD["prefix_padding_ms"], VAD["silence_duration_ms"])  # type: ignore[arg-type]
    noise = NoiseReductionUpdate("near_field")
    assert event == transcription.UpdateSession(
        {
            **TRANSCRIPTION,
            "input_rate": 24000,
            "turn_detection": vad,
            "noise_reduction": noise,
            "partials": False,
        },
        "evt_1",
    )
    assert parser.generation is GA


def test_beta_transcription_update_from_the_sdk() -> None:
    sent = Sent(BETA)
    sent.conn.transcription_session.update(
        session={
            "input_audio_format": "pcm16",
            "input_audio_transcription": TRANSCRIPTION,
            "turn_detection": {**VAD, "create_response": True},
            "modalities": ["text"],
            "include": ["item.input_audio_transcription.logprobs"],
        }
    )
    parser = ClientParser(GA)
    event = parser.parse(sent.last())
    assert isinstance(event, transcription.UpdateSession)
    assert dict(event.values) == {
        **TRANSCRIPTION,
        "input_rate": 16_000,
        "turn_detection": ServerVADConfig(0.3, 200, 700),
        "partials": False,  # `include` names no mstar.transcription.partial
    }
    assert parser.generation is BETA


@pytest.mark.parametrize("generation", [GA, BETA])
@pytest.mark.parametrize("eagerness", ["low", "medium", "high", "auto", None])
def test_semantic_vad_from_the_sdk(generation: Generation, eagerness: str | None) -> None:
    """semantic_vad, as each generation's SDK writes it, for both kinds of session."""
    semantic: dict[str, Any] = {"type": "semantic_vad", "create_response": False, "interrupt_response": True}
    if eagerness is not None:
        semantic["eagerness"] = eagerness
    # Any server_vad field is ignored: "Used only for `server_vad` mode".
    semantic["silence_duration_ms"] = 900
    config = SemanticVADConfig(eagerness=eagerness or "auto")  # type: ignore[arg-type]
    sent = Sent(generation)
    if generation is GA:
        audio = {"input": {"turn_detection": semantic}}
        sent.conn.session.update(session={"type": "transcription", "audio": audio})
        transcription_raw = sent.last()
        sent.conn.session.update(session={"type": "realtime", "audio": audio})
    else:
        sent.conn.transcription_session.update(session={"turn_detection": semantic})
        transcription_raw = sent.last()
        sent.conn.session.update(session={"turn_detection": semantic})
    assert ClientParser(generation).parse(transcription_raw) == transcription.UpdateSession(
        {"turn_detection": config}
    )
    assert AgentClientParser(generation).parse(sent.last()) == agent.UpdateSession(
        {"turn_detection": TurnDetection(config, create_response=False, interrupt_response=True)}
    )


@pytest.mark.parametrize("generation", [GA, BETA])
def test_buffer_events_from_the_sdk(generation: Generation) -> None:
    sent = Sent(generation)
    for parser in (ClientParser(generation), AgentClientParser(generation)):
        events = (type(parser) is ClientParser and transcription) or agent
        sent.conn.input_audio_buffer.append(audio="AAEC", event_id="evt_a")
        assert parser.parse(sent.last()) == events.AppendAudio("AAEC", "evt_a")
        sent.conn.input_audio_buffer.commit()
        assert parser.parse(sent.last()) == events.CommitBuffer()
        sent.conn.input_audio_buffer.clear(event_id="evt_c")
        assert parser.parse(sent.last()) == events.ClearBuffer("evt_c")


def test_a_refused_update_leaves_the_generation() -> None:
    parser = ClientParser(GA)
    bad = {"type": "transcription_session.update", "session": {"input_audio_format": "g711_ulaw"}}
    assert isinstance(parser.parse(json.dumps(bad)), transcription.Rejected)
    assert parser.generation is GA


def test_unknown_fields_are_ignored() -> None:
    update = {"type": "session.update", "future": 1, "session": {"type": "transcription", "future": {"x": 1}}}
    assert ClientParser(GA).parse(json.dumps(update)) == transcription.UpdateSession({})
    assert AgentClientParser(GA).parse(
        json.dumps({**update, "session": {"future": 2}})
    ) == agent.UpdateSession({})


# -- agent sessions --------------------------------------------------------------------


def test_ga_agent_update_from_the_sdk() -> None:
    sent = Sent(GA)
    sent.conn.session.update(
        session={
            "type": "realtime",
            "model": "qwen2.5-1.5b-instruct",
            "instructions": "Be brief.",
            "output_modalities": ["text"],
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": TRANSCRIPTION,
                    "turn_detection": {**VAD, "create_response": False, "interrupt_response": True},
                },
                "output": {"format": {"type": "audio/pcm"}, "voice": "marin", "speed": 1.25},
            },
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "max_output_tokens": 512,
            "tracing": "auto",
            "truncation": "auto",
        }
    )
    parser = AgentClientParser(BETA)
    event = parser.parse(sent.last())
    assert isinstance(event, agent.UpdateSession), event
    assert dict(event.values) == {
        "model": "qwen2.5-1.5b-instruct",
        "instructions": "Be brief.",
        "output_modalities": ("text",),
        "input_rate": 24000,
        "input_codec": "pcm16",
        "input_transcription": InputTranscription(**TRANSCRIPTION),
        "turn_detection": TurnDetection(ServerVADConfig(0.3, 200, 700), create_response=False),
        "output_rate": 24000,
        "output_codec": "pcm16",
        "voice": "marin",
        "speed": 1.25,
        "tools": (WEATHER_TOOL,),
        "tool_choice": ForcedFunction("get_weather"),
        "max_output_tokens": 512,
    }
    assert parser.generation is GA, "an update with a session.type is GA's"


def test_beta_agent_update_from_the_sdk() -> None:
    sent = Sent(BETA)
    sent.conn.session.update(
        session={
            "modalities": ["text", "audio"],
            "instructions": "Be brief.",
            "voice": "alloy",
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "input_audio_transcription": {"model": "whisper-1"},
            "turn_detection": None,
            "tools": [WEATHER],
            "tool_choice": "get_weather",
            "max_response_output_tokens": "inf",
            "temperature": 0.7,
        }
    )
    parser = AgentClientParser(BETA)
    event = parser.parse(sent.last())
    assert isinstance(event, agent.UpdateSession), event
    assert dict(event.values) == {
        "instructions": "Be brief.",
        "output_modalities": ("audio",),
        "max_output_tokens": None,
        "tools": (WEATHER_TOOL,),
        "tool_choice": ForcedFunction("get_weather"),
        "voice": "alloy",
        # Beta's pcm16 is 24 kHz: "16-bit PCM at a 24kHz sample rate".
        "input_rate": 24000,
        "output_rate": 24000,
        "input_codec": "pcm16",
        "output_codec": "pcm16",
        "input_transcription": InputTranscription("whisper-1"),
        "turn_detection": None,
    }
    assert parser.generation is BETA


@pytest.mark.parametrize("generation", [GA, BETA])
def test_null_sets_the_default_where_the_sdk_allows_null(generation: Generation) -> None:
    nulls = ["instructions", "tools", "tool_choice"]
    if generation is GA:
        session: dict[str, Any] = {"type": "realtime", "output_modalities": None, "max_output_tokens": None}
        session["audio"] = {"output": {"voice": None, "speed": None}}
    else:
        session = {"modalities": None, "max_response_output_tokens": None, "voice": None, "speed": None}
    event = AgentClientParser(generation).parse(
        json.dumps({"type": "session.update", "session": {**session, **dict.fromkeys(nulls)}})
    )
    assert isinstance(event, agent.UpdateSession), event
    defaults = AgentConfig()
    assert dict(event.values) == {
        key: getattr(defaults, key)
        for key in (*nulls, "output_modalities", "max_output_tokens", "voice", "speed")
    }
    response = {"type": "response.create", "response": dict.fromkeys([*nulls, "voice", "output_modalities"])}
    assert AgentClientParser(generation).parse(json.dumps(response)) == agent.CreateResponse({})


@pytest.mark.parametrize(
    ("generation", "item", "expected"),
    [
        (
            GA,
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            agent.Message(None, "user", (agent.ContentPart("input_text", "Hi"),)),
        ),
        (
            GA,
            {
                "type": "message",
                "role": "system",
                "id": "sys_1",
                "content": [{"type": "input_text", "text": "Be kind."}],
            },
            agent.Message("sys_1", "system", (agent.ContentPart("input_text", "Be kind."),)),
        ),
        (
            GA,
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sure."}]},
            agent.Message(None, "assistant", (agent.ContentPart("output_text", "Sure."),)),
        ),
        (
            BETA,
            {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "Sure."}]},
            agent.Message(None, "assistant", (agent.ContentPart("output_text", "Sure."),)),
        ),
        (
            GA,
            {"type": "function_call_output", "call_id": "call_1", "output": '{"celsius": 21}'},
            agent.FunctionCallOutput(None, "call_1", '{"celsius": 21}'),
        ),
        (
            BETA,
            {"type": "function_call_output", "call_id": "call_1", "output": "21", "id": "item_9"},
            agent.FunctionCallOutput("item_9", "call_1", "21"),
        ),
    ],
)
def test_items_from_the_sdk(generation: Generation, item: dict[str, Any], expected: agent.Item) -> None:
    sent = Sent(generation)
    sent.conn.conversation.item.create(item=item, previous_item_id="item_0", event_id="evt_i")
    event = AgentClientParser(generation).parse(sent.last())
    assert event == agent.CreateItem(expected, "item_0", "evt_i")


def test_ga_response_create_from_the_sdk() -> None:
    sent = Sent(GA)
    sent.conn.response.create(
        response={
            "instructions": "Answer in French.",
            "output_modalities": ["text"],
            "tool_choice": "none",
            "tools": [WEATHER],
            "max_output_tokens": 64,
            "audio": {"output": {"voice": "cedar"}},
            "conversation": "auto",
            "metadata": {"turn": "3"},
        }
    )
    event = AgentClientParser(GA).parse(sent.last())
    assert event == agent.CreateResponse(
        {
            "instructions": "Answer in French.",
            "output_modalities": ("text",),
            "tool_choice": "none",
            "tools": (WEATHER_TOOL,),
            "max_output_tokens": 64,
            "voice": "cedar",
        },
        metadata={"turn": "3"},
    )


def test_beta_response_create_from_the_sdk() -> None:
    sent = Sent(BETA)
    sent.conn.response.create(
        response={
            "modalities": ["text", "audio"],
            "voice": "alloy",
            "tool_choice": "required",
            "max_response_output_tokens": 10,
        }
    )
    event = AgentClientParser(BETA).parse(sent.last())
    assert event == agent.CreateResponse(
        {
            "output_modalities": ("audio",),
            "voice": "alloy",
            "tool_choice": "required",
            "max_output_tokens": 10,
        }
    )
    sent.conn.response.create()
    assert AgentClientParser(BETA).parse(sent.last()) == agent.CreateResponse({})


@pytest.mark.parametrize("generation", [GA, BETA])
def test_cancel_and_clear_from_the_sdk(generation: Generation) -> None:
    sent = Sent(generation)
    parser = AgentClientParser(generation)
    sent.conn.response.cancel(response_id="resp_1", event_id="evt_x")
    assert parser.parse(sent.last()) == agent.CancelResponse("resp_1", "evt_x")
    sent.conn.response.cancel()
    assert parser.parse(sent.last()) == agent.CancelResponse()
    sent.conn.output_audio_buffer.clear()
    assert parser.parse(sent.last()) == agent.ClearOutputAudio()


# -- malformed events ------------------------------------------------------------------

T, A = "transcription", "agent"
LONG_ID = "e" * (MAX_EVENT_ID_CHARS + 1)


def _ga(**session: Any) -> dict[str, Any]:
    return {"type": "session.update", "session": {"type": "realtime", **session}}


def _item(**item: Any) -> dict[str, Any]:
    return {"type": "conversation.item.create", "item": item}


def _user(*parts: dict[str, Any], role: str = "user") -> dict[str, Any]:
    return _item(type="message", role=role, content=list(parts))


MALFORMED: list[tuple[str, Generation, Any, str, str | None]] = [
    # The envelope, in both sessions.
    (T, GA, b"\x00\x01", "invalid_event", None),
    (A, GA, b"{}", "unknown_or_invalid_event", None),
    (T, BETA, "{not json", "invalid_event", None),
    (A, GA, "[1, 2]", "unknown_or_invalid_event", None),
    (T, GA, {"event_id": "e1"}, "invalid_event", "type"),
    (A, BETA, {"type": ["session.update"]}, "unknown_or_invalid_event", "type"),
    (T, GA, {"type": "input_audio_buffer.commit", "event_id": 7}, "invalid_value", "event_id"),
    (A, GA, {"type": "input_audio_buffer.commit", "event_id": LONG_ID}, "invalid_value", "event_id"),
    # Events a session does not serve.
    (T, GA, {"type": "response.create"}, "invalid_event", "type"),
    (T, BETA, _user({"type": "input_text", "text": "hi"}), "invalid_event", "type"),
    (A, GA, {"type": "transcription_session.update", "session": {}}, "unknown_or_invalid_event", "type"),
    (T, GA, {"type": "conversation.item.delete", "item_id": "i"}, "invalid_event", "type"),
    (
        A,
        GA,
        {"type": "conversation.item.truncate", "item_id": "i", "content_index": 0},
        "invalid_value",
        "audio_end_ms",
    ),
    (A, GA, {"type": "conversation.item.retrieve", "item_id": ""}, "invalid_value", "item_id"),
    (A, GA, {"type": "x" * 10_000}, "unknown_or_invalid_event", "type"),
    # Buffer events.
    (T, GA, {"type": "input_audio_buffer.append"}, "invalid_value", "audio"),
    (A, BETA, {"type": "input_audio_buffer.append", "audio": ["AAAA"]}, "invalid_value", "audio"),
    # Transcription updates.
    (T, GA, {"type": "session.update"}, "invalid_value", "session"),
    (T, GA, {"type": "session.update", "session": "transcription"}, "invalid_value", "session"),
    (T, GA, {"type": "session.update", "session": {"type": "realtime"}}, "invalid_value", "session.type"),
    (
        T,
        GA,
        {"type": "session.update", "session": {"audio": {"input": {"transcription": {"model": 1}}}}},
        "invalid_value",
        "session.audio.input.transcription.model",
    ),
    (
        T,
        GA,
        {
            "type": "session.update",
            "session": {"audio": {"input": {"turn_detection": {"silence_duration_ms": -5}}}},
        },
        "invalid_value",
        "session.audio.input.turn_detection.silence_duration_ms",
    ),
    (
        T,
        GA,
        {
            "type": "session.update",
            "session": {"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "max"}}}},
        },
        "invalid_value",
        "session.audio.input.turn_detection.eagerness",
    ),
    (
        T,
        BETA,
        {
            "type": "transcription_session.update",
            "session": {"turn_detection": {"type": "semantic_vad", "eagerness": "fast"}},
        },
        "invalid_value",
        "session.turn_detection.eagerness",
    ),
    (
        T,
        GA,
        {"type": "session.update", "session": {"audio": {"input": {"format": {"type": "audio/pcmu"}}}}},
        "invalid_value",
        "session.audio.input.format",
    ),
    (T, GA, {"type": "session.update", "session": {"audio": []}}, "invalid_value", "session.audio"),
    (
        T,
        BETA,
        {
            "type": "transcription_session.update",
            "session": {"input_audio_transcription": {"language": "x" * (MAX_LANGUAGE_CHARS + 1)}},
        },
        "invalid_value",
        "session.input_audio_transcription.language",
    ),
    (
        T,
        BETA,
        {
            "type": "transcription_session.update",
            "session": {"input_audio_transcription": {"prompt": "x" * (MAX_PROMPT_CHARS + 1)}},
        },
        "invalid_value",
        "session.input_audio_transcription.prompt",
    ),
    (
        T,
        BETA,
        {"type": "transcription_session.update", "session": {"mstar": {"chunk_seconds": "inf"}}},
        "invalid_value",
        "session.mstar.chunk_seconds",
    ),
    # Agent updates.
    (A, GA, _ga(type="transcription"), "invalid_session_type", "session.type"),
    (A, GA, _ga(type="translation"), "invalid_value", "session.type"),
    (A, GA, _ga(instructions="x" * (MAX_INSTRUCTIONS_CHARS + 1)), "invalid_value", "session.instructions"),
    (A, GA, _ga(instructions=["Be brief."]), "invalid_value", "session.instructions"),
    (A, GA, _ga(output_modalities=[]), "invalid_value", "session.output_modalities"),
    (A, GA, _ga(output_modalities=["video"]), "invalid_value", "session.output_modalities[0]"),
    (
        A,
        GA,
        _ga(audio={"output": {"voice": "v" * (MAX_VOICE_CHARS + 1)}}),
        "invalid_value",
        "session.audio.output.voice",
    ),
    (A, GA, _ga(audio={"output": {"speed": 3}}), "invalid_value", "session.audio.output.speed"),
    (A, GA, _ga(audio={"output": {"speed": True}}), "invalid_value", "session.audio.output.speed"),
    (
        A,
        GA,
        _ga(audio={"output": {"format": {"type": "audio/opus"}}}),
        "invalid_value",
        "session.audio.output.format",
    ),
    (
        A,
        GA,
        _ga(audio={"input": {"turn_detection": {"type": "push_to_talk"}}}),
        "invalid_value",
        "session.audio.input.turn_detection.type",
    ),
    (
        A,
        GA,
        _ga(audio={"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "eager"}}}),
        "invalid_value",
        "session.audio.input.turn_detection.eagerness",
    ),
    (
        A,
        BETA,
        {"type": "session.update", "session": {"turn_detection": {"type": "semantic_vad", "eagerness": 1}}},
        "invalid_value",
        "session.turn_detection.eagerness",
    ),
    (
        A,
        GA,
        _ga(audio={"input": {"turn_detection": {"create_response": "yes"}}}),
        "invalid_value",
        "session.audio.input.turn_detection.create_response",
    ),
    (A, GA, _ga(tools=[{"type": "mcp", "server_label": "x"}]), "invalid_value", "session.tools[0].type"),
    (A, GA, _ga(tools=[WEATHER, {**WEATHER, "name": "n" * 65}]), "invalid_value", "session.tools[1].name"),
    (A, GA, _ga(tools=[{**WEATHER, "name": "get weather"}]), "invalid_value", "session.tools[0].name"),
    (A, GA, _ga(tools=[{**WEATHER, "parameters": "{}"}]), "invalid_value", "session.tools[0].parameters"),
    (A, GA, _ga(tools=[WEATHER] * (MAX_TOOLS + 1)), "invalid_value", "session.tools"),
    (A, GA, _ga(tool_choice="sometimes"), "invalid_value", "session.tool_choice"),
    (A, GA, _ga(tool_choice={"type": "function"}), "invalid_value", "session.tool_choice.name"),
    (A, GA, _ga(max_output_tokens=0), "invalid_value", "session.max_output_tokens"),
    (A, GA, _ga(max_output_tokens=True), "invalid_value", "session.max_output_tokens"),
    (
        A,
        BETA,
        {"type": "session.update", "session": {"modalities": "text"}},
        "invalid_value",
        "session.modalities",
    ),
    (
        A,
        BETA,
        {"type": "session.update", "session": {"input_audio_format": "opus"}},
        "invalid_value",
        "session.input_audio_format",
    ),
    (
        A,
        BETA,
        {"type": "session.update", "session": {"tool_choice": "no such tool"}},
        "invalid_value",
        "session.tool_choice",
    ),
    # Items.
    (A, GA, {"type": "conversation.item.create"}, "invalid_value", "item"),
    (A, GA, {"type": "conversation.item.create", "item": "hi"}, "invalid_value", "item"),
    (A, GA, _item(type="mcp_call", name="f", arguments="{}"), "invalid_value", "item.type"),
    (A, GA, _user({"type": "input_text", "text": "hi"}, role="tool"), "invalid_value", "item.role"),
    (A, GA, _user(), "invalid_value", "item.content"),
    (A, GA, _user({"type": "input_image", "image_url": "data:,"}), "invalid_value", "item.content[0].type"),
    (A, GA, _user({"type": "output_text", "text": "hi"}), "invalid_value", "item.content[0].type"),
    (
        A,
        GA,
        _user(
            {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b" * (MAX_TEXT_CHARS + 1)}
        ),
        "invalid_value",
        "item.content[1].text",
    ),
    (
        A,
        GA,
        _user({"type": "input_text", "text": "hi"}, role="assistant"),
        "invalid_value",
        "item.content[0].type",
    ),
    (A, GA, _item(type="function_call_output", output="21"), "invalid_value", "item.call_id"),
    (A, GA, _item(type="function_call_output", call_id="c", output=21), "invalid_value", "item.output"),
    (
        A,
        GA,
        _item(type="function_call_output", call_id="c", output="x" * (MAX_TEXT_CHARS + 1)),
        "invalid_value",
        "item.output",
    ),
    (
        A,
        GA,
        _item(type="function_call_output", call_id="c", output="", id="i" * 129),
        "invalid_value",
        "item.id",
    ),
    (
        A,
        GA,
        {**_user({"type": "input_text", "text": "hi"}), "previous_item_id": 3},
        "invalid_value",
        "previous_item_id",
    ),
    # Responses.
    (A, GA, {"type": "response.create", "response": "now"}, "invalid_value", "response"),
    (
        A,
        GA,
        {"type": "response.create", "response": {"instructions": 5}},
        "invalid_value",
        "response.instructions",
    ),
    (
        A,
        GA,
        {"type": "response.create", "response": {"output_modalities": ["video"]}},
        "invalid_value",
        "response.output_modalities[0]",
    ),
    (
        A,
        GA,
        {"type": "response.create", "response": {"conversation": "conv_other"}},
        "invalid_value",
        "response.conversation",
    ),
    (
        A,
        BETA,
        {"type": "response.create", "response": {"max_response_output_tokens": "lots"}},
        "invalid_value",
        "response.max_response_output_tokens",
    ),
    (
        A,
        GA,
        {"type": "response.create", "response": {"tool_choice": 3}},
        "invalid_value",
        "response.tool_choice",
    ),
    (A, GA, {"type": "response.cancel", "response_id": 3}, "invalid_value", "response_id"),
    (A, GA, {"type": "output_audio_buffer.clear", "event_id": None, "x": 1}, "", None),
]


@pytest.mark.parametrize(("session", "generation", "raw", "code", "param"), MALFORMED)
def test_malformed_events_are_error_events(
    session: str, generation: Generation, raw: Any, code: str, param: str | None
) -> None:
    event_id = None
    if isinstance(raw, dict):
        # A readable event_id is quoted, unless the envelope itself (the id, the type) is at fault.
        if "event_id" not in raw:
            raw = {**raw, "event_id": "evt_bad"}
        readable = isinstance(raw["event_id"], str) and len(raw["event_id"]) <= MAX_EVENT_ID_CHARS
        event_id = raw["event_id"] if readable and isinstance(raw.get("type"), str) else None
        raw = json.dumps(raw)
    if session == T:
        parsed: Any = ClientParser(generation).parse(raw)
    else:
        parsed = AgentClientParser(generation).parse(raw)
    if not code:
        assert not isinstance(parsed, transcription.Rejected | agent.Rejected), parsed
        return
    assert isinstance(parsed, transcription.Rejected | agent.Rejected), parsed
    error = speech.Error(parsed.error, parsed.event_id)
    wire = wire_event(error, generation) if session == T else agent_wire_event(error, generation)
    assert wire is not None
    validate(wire, generation)
    assert wire["error"]["type"] == "invalid_request_error"
    assert (wire["error"]["code"], wire["error"]["param"]) == (code, param), wire["error"]["message"]
    assert wire["error"]["event_id"] == event_id
    assert len(wire["error"]["message"]) <= 500
