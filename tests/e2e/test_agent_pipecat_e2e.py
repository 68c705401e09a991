"""pipecat's OpenAI Realtime event parser on every event of a spoken turn, a tool call and a barge-in.

pipecat's `OpenAIRealtimeLLMService` reads each server frame with `parse_server_event`
(`pipecat.services.openai.realtime.events`, its own pydantic models), and leaves its receive
loop on an `error` event, apart from two codes. So in these flows every event must be one
pipecat models (older versions raise on any other type), parse, and no `error` may come.
The server is a real `dragoman serve`, driven by the openai SDK (`tests/e2e/agent_helpers.py`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.realtime_helpers import Transcript, answer_begins, read_until
from harness.server import Server
from tests.e2e.agent_helpers import (
    INTERRUPTION,
    QUESTION,
    STORYTELLER,
    WEATHER,
    WEATHER_APP,
    agent,
    ask_in_text,
    response_done,
    spoken_turn,
)

events = pytest.importorskip("pipecat.services.openai.realtime.events", reason="pipecat-ai is not installed")

pytestmark = pytest.mark.e2e

#: The error codes pipecat's service lets pass (`_handle_evt_error`).
TOLERATED = {"conversation_already_has_active_response", "response_cancel_not_active"}


def check_with_pipecat(log: Transcript) -> list[Any]:
    """Each event as pipecat parses it; fails on a type it does not model or a field it refuses."""
    parsed = []
    known = set(events._server_event_types)
    for event in log.events:
        assert event["type"] in known, f"pipecat has no model of {event['type']!r}"
        model = events.parse_server_event(json.dumps(event))
        assert model is not None and model.type == event["type"]
        parsed.append(model)
    fatal = [e for e in log.errors() if e.get("code") not in TOLERATED]
    assert not fatal, f"pipecat would stop on these errors: {fatal}"
    return parsed


async def test_a_spoken_turn_parses(server: Server) -> None:
    async with agent(server) as (conn, log):
        await spoken_turn(conn, QUESTION)
        await read_until(conn, log, response_done, limit=180)
    parsed = check_with_pipecat(log)
    done = [p for p in parsed if isinstance(p, events.ResponseDone)]
    assert done and done[-1].response.status == "completed"
    usage = done[-1].response.usage
    assert (
        usage is not None and usage.input_token_details is not None and usage.output_token_details is not None
    )
    assert any(isinstance(p, events.ConversationItemInputAudioTranscriptionCompleted) for p in parsed)


async def test_a_tool_call_and_its_answer_parse(server: Server) -> None:
    async with agent(server, tools=[WEATHER], tool_choice="auto", instructions=WEATHER_APP) as (conn, log):
        await ask_in_text(conn, log, "What is the weather in Paris right now?")
        (call,) = log.of("response.function_call_arguments.done")
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"celsius": 21}'}
        await conn.conversation.item.create(item=output)
        await conn.response.create(response={"tool_choice": "none"})
        await read_until(
            conn, log, lambda e: response_done(e) and len(log.of("response.done")) == 2, limit=120
        )
    parsed = check_with_pipecat(log)
    (args,) = [p for p in parsed if isinstance(p, events.ResponseFunctionCallArgumentsDone)]
    assert len(args.call_id) <= 32 and '"city"' in args.arguments


async def test_a_barge_in_parses(server: Server) -> None:
    async with agent(server, instructions=STORYTELLER) as (conn, log):
        await answer_begins(conn, log, "Tell a long story.")
        await spoken_turn(conn, INTERRUPTION)
        await read_until(conn, log, response_done, limit=60)
        await read_until(
            conn, log, lambda e: e["type"] == "conversation.item.input_audio_transcription.completed"
        )
    parsed = check_with_pipecat(log)
    cancelled = [p for p in parsed if isinstance(p, events.ResponseDone) and p.response.status == "cancelled"]
    assert cancelled, "the story was cut off by the user's speech"
