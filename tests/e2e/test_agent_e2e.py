"""The voice agent on `/v1/realtime` against a real `dragoman serve`, driven by the openai SDK.

Every server event is validated against `openai.types.realtime` as it arrives. Speech
comes from the real recordings in ../shared/eval; the answer's audio is sent back to
the same server's transcription endpoint, so the project's own STT judges what was said.
Helpers: `tests/e2e/agent_helpers.py`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets
from openai.types.beta.realtime import ConversationItemParam

from dragoman.protocol.realtime.generation import Generation
from harness.realtime_helpers import (
    answer_begins,
    read_until,
    reference,
    wer,
)
from harness.server import Server
from tests.e2e.agent_helpers import (
    INTERRUPTION,
    QUESTION,
    STORYTELLER,
    WEATHER,
    WEATHER_APP,
    agent,
    answer_audio,
    ask_in_text,
    client,
    get,
    in_order,
    kinds,
    pool_free,
    response_done,
    spoken_turn,
    transcribe,
)
from tests.unit.realtime_sdk import validate

pytestmark = pytest.mark.e2e


# -- a spoken turn ------------------------------------------------------------------


async def test_a_spoken_question_gets_a_spoken_answer_in_the_protocols_order(server: Server) -> None:
    async with agent(server) as (conn, log):
        await spoken_turn(conn, QUESTION)
        await read_until(conn, log, response_done, limit=180)
    order = kinds(log)
    assert in_order(
        order,
        "session.created",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed",
        "response.created",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.done",
    ), order
    assert order.index("response.created") < order.index("response.output_audio.delta")
    assert order.count("response.output_audio_transcript.done") == 1
    (heard,) = log.completed
    assert wer([reference(QUESTION)], [heard["transcript"]]) < 0.3
    (done,) = log.of("response.done")
    assert done["response"]["status"] == "completed", done
    said = "".join(e["delta"] for e in log.of("response.output_audio_transcript.delta"))
    (final,) = log.of("response.output_audio_transcript.done")
    assert said == final["transcript"] and said.strip(), "the deltas join to the final transcript"
    # What the answer's audio says, by the server's own STT, is what its transcript says.
    heard_back = await transcribe(server, answer_audio(log, done["response"]["id"]))
    assert wer([final["transcript"]], [heard_back]) < 0.35, (final["transcript"], heard_back)


async def test_conversation_item_create_adds_text_without_answering(server: Server) -> None:
    async with agent(server) as (conn, log):
        await conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "My cat is Tom."}],
            }
        )
        await conn.session.update(session={"type": "realtime", "instructions": "Be brief."})
        await read_until(conn, log, lambda e: e["type"] == "session.updated")
        await asyncio.sleep(1.0)
    assert kinds(log) == [
        "session.created",
        "conversation.item.added",
        "conversation.item.done",
        "session.updated",
    ]
    assert log.of("conversation.item.added")[0]["item"]["content"][0]["text"] == "My cat is Tom."


async def test_an_instructions_update_mid_session_changes_the_next_answer(server: Server) -> None:
    def answer(response: dict[str, Any]) -> str:
        (message,) = [item for item in response["output"] if item["type"] == "message"]
        return str(message["content"][0]["text"]).lower()

    async with agent(server) as (conn, log):
        before = answer(await ask_in_text(conn, log, "What is two plus two?"))
        await conn.session.update(
            session={
                "type": "realtime",
                "instructions": "Your name is Zorblat. Answer in one short sentence.",
            }
        )
        # Only the updated instructions hold the name.
        after = answer(await ask_in_text(conn, log, "What is your name?"))
    assert "zorblat" not in before and "zorblat" in after, (before, after)


async def test_text_only_responses_send_text_and_no_audio(server: Server) -> None:
    async with agent(server) as (conn, log):
        response = await ask_in_text(conn, log, "Name one colour.")
    assert response["status"] == "completed"
    assert log.of("response.output_text.delta") and not log.of("response.output_audio.delta")
    (done,) = log.of("response.output_text.done")
    assert done["text"] == "".join(e["delta"] for e in log.of("response.output_text.delta"))


async def test_a_client_truncates_an_answer_to_what_it_played_and_deletes_an_item(server: Server) -> None:
    async with agent(server, instructions="Answer in two or three sentences.") as (conn, log):
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Why is the sky blue?"}],
        }
        await conn.conversation.item.create(item=item)
        await conn.response.create()
        await read_until(conn, log, response_done, limit=120)
        (message,) = [i for i in log.of("response.done")[0]["response"]["output"] if i["type"] == "message"]
        spoken = str(message["content"][0]["transcript"])
        first_words = log.of("response.output_audio_transcript.delta")[0]["delta"].split()
        # The client played only the first 50 ms: the first clause had begun, nothing after it.
        await conn.conversation.item.truncate(item_id=message["id"], content_index=0, audio_end_ms=50)
        await read_until(conn, log, lambda e: e["type"] in ("conversation.item.truncated", "error"))
        await conn.conversation.item.retrieve(item_id=message["id"])
        await read_until(conn, log, lambda e: e["type"] in ("conversation.item.retrieved", "error"))
        user_id = log.of("conversation.item.added")[0]["item"]["id"]
        await conn.conversation.item.delete(item_id=user_id)
        await read_until(conn, log, lambda e: e["type"] in ("conversation.item.deleted", "error"))
    assert not log.errors(), log.errors()
    (truncated,) = log.of("conversation.item.truncated")
    assert (truncated["item_id"], truncated["audio_end_ms"]) == (message["id"], 50)
    heard = str(log.of("conversation.item.retrieved")[0]["item"]["content"][0]["transcript"])
    assert heard.split() == first_words and len(heard) < len(spoken), (heard, spoken)
    assert log.of("conversation.item.deleted")[0]["item_id"] == user_id


# -- cancelling and barge-in -------------------------------------------------------------


async def test_response_cancel_closes_it_as_client_cancelled(server: Server) -> None:
    async with agent(server, instructions=STORYTELLER) as (conn, log):
        await answer_begins(conn, log, "Tell a long story.")
        await conn.response.cancel()
        await read_until(conn, log, response_done)
        (done,) = log.of("response.done")
        assert done["response"]["status"] == "cancelled"
        assert done["response"]["status_details"]["reason"] == "client_cancelled"
        assert in_order(
            kinds(log), "response.output_audio.done", "response.output_audio_transcript.done", "response.done"
        )
        # The session lives on and answers again.
        short = {"output_modalities": ["text"], "instructions": "Answer in one short sentence."}
        await conn.response.create(response=short)
        await read_until(conn, log, response_done, limit=120)
        assert log.of("response.done")[-1]["response"]["status"] == "completed"


async def test_a_second_response_create_while_one_is_active_is_refused(server: Server) -> None:
    async with agent(server) as (conn, log):
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Hello there."}],
        }
        await conn.conversation.item.create(item=item)
        await conn.response.create()
        await conn.response.create()
        await read_until(conn, log, response_done, limit=120)
    assert [e["code"] for e in log.errors()] == ["conversation_already_has_active_response"]
    assert log.of("response.done")[0]["response"]["status"] == "completed"


async def test_barge_in_closes_the_response_before_speech_started(server: Server) -> None:
    async with agent(server, instructions=STORYTELLER) as (conn, log):
        await answer_begins(conn, log, "Tell a long story.")
        await spoken_turn(conn, INTERRUPTION)
        await read_until(conn, log, lambda e: e["type"] == "input_audio_buffer.speech_started", limit=60)
    tail = kinds(log)[kinds(log).index("response.output_audio.done") :]
    closing = [k for k in tail if not k.startswith(("response.output_audio.delta", "response.content_part"))]
    assert closing[:2] == ["response.output_audio.done", "response.output_audio_transcript.done"]
    assert closing.index("response.done") < closing.index("input_audio_buffer.speech_started")
    (done,) = log.of("response.done")
    assert (done["response"]["status"], done["response"]["status_details"]["reason"]) == (
        "cancelled",
        "turn_detected",
    )
    (partial,) = log.of("response.output_audio_transcript.done")
    said = "".join(e["delta"] for e in log.of("response.output_audio_transcript.delta"))
    assert partial["transcript"] == said, "the partial transcript is what was spoken up to the cut"


async def test_with_interrupt_response_off_the_answer_plays_on_and_the_speech_is_heard(
    server: Server,
) -> None:
    turns = {"type": "server_vad", "interrupt_response": False, "create_response": False}
    async with agent(server, audio={"input": {"turn_detection": turns}}) as (conn, log):
        await answer_begins(conn, log, "Count to five.")
        await spoken_turn(conn, INTERRUPTION)
        await read_until(
            conn,
            log,
            lambda e: e["type"] == "conversation.item.input_audio_transcription.completed",
            limit=120,
        )
        if not log.of("response.done"):
            await read_until(conn, log, response_done, limit=120)
    (done,) = log.of("response.done")
    assert done["response"]["status"] == "completed", "the response was not interrupted"
    assert wer([reference(INTERRUPTION)], [log.completed[0]["transcript"]]) < 0.3


# -- tools -------------------------------------------------------------------------------


async def test_a_tool_call_then_its_output_is_spoken(server: Server) -> None:
    async with agent(server, tools=[WEATHER], tool_choice="auto", instructions=WEATHER_APP) as (conn, log):
        await ask_in_text(conn, log, "What is the weather in Paris right now?")
        calls = log.of("response.function_call_arguments.done")
        assert len(calls) == 1, kinds(log)
        (call,) = calls
        assert call["name"] == "get_weather"
        assert "paris" in json.loads(call["arguments"])["city"].lower()
        await conn.conversation.item.create(
            item={
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": '{"sky": "sunny", "celsius": 21}',
            }
        )
        await read_until(
            conn,
            log,
            lambda e: e["type"] == "conversation.item.added" and e["item"]["type"] == "function_call_output",
        )
        # Speak the result: no further call (a small model would call again otherwise).
        await conn.response.create(response={"tool_choice": "none"})
        await read_until(conn, log, response_done, limit=120)
    final = log.of("response.done")[-1]["response"]
    assert final["status"] == "completed"
    assert log.of("response.output_audio_transcript.done")[-1]["transcript"].strip()


# -- turn detection, limits and errors ---------------------------------------------------


async def test_semantic_vad_ends_the_turn_and_answers(server: Server) -> None:
    turns = {"type": "semantic_vad", "eagerness": "high"}
    async with agent(server, audio={"input": {"turn_detection": turns}}) as (conn, log):
        assert (
            log.of("session.updated")[-1]["session"]["audio"]["input"]["turn_detection"]["type"]
            == "semantic_vad"
        )
        await spoken_turn(conn, QUESTION)
        await read_until(conn, log, response_done, limit=180)
    assert in_order(kinds(log), "input_audio_buffer.speech_stopped", "response.created", "response.done")


async def test_the_pool_limit_refuses_a_second_session_with_1008(server: Server) -> None:
    async with agent(server) as (_conn, _log):
        assert get(server, "/v1/pool")["busy"] == 1
        async with websockets.connect(server.ws + "/v1/realtime?model=x") as second:
            error = json.loads(await second.recv())
            assert error["type"] == "error" and error["error"]["code"] == "session_limit_reached"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await second.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    usage = get(server, "/v1/usage")["counters"]
    assert usage["sessions_refused"] >= 1 and usage["sessions_opened"] >= 1


async def test_malformed_events_get_errors_and_the_session_lives_on(server: Server) -> None:
    async with agent(server) as (conn, log):
        for raw in (
            "{not json",
            json.dumps({"type": "response.explode"}),
            json.dumps({"type": "session.update", "session": {"type": "transcription"}}),
        ):
            await conn._connection.send(raw)  # the SDK sends only well-formed events
            await read_until(conn, log, lambda e: e["type"] == "error")
        codes = [e["code"] for e in log.errors()]
        assert codes == ["unknown_or_invalid_event", "unknown_or_invalid_event", "invalid_session_type"]
        await conn.session.update(session={"type": "realtime", "instructions": "Still here."})
        await read_until(conn, log, lambda e: e["type"] == "session.updated")


# -- the beta generation -------------------------------------------------------------------


async def test_a_beta_client_gets_beta_event_names(server: Server) -> None:
    """`client.beta.realtime.connect` sends `OpenAI-Beta: realtime=v1`: the answer comes as
    `response.audio.*` and `response.audio_transcript.*`, each event valid for the beta SDK."""
    await pool_free(server)
    api = client(server)
    events: list[dict[str, Any]] = []
    async with api.beta.realtime.connect(model="dragoman-agent") as conn:
        await conn.session.update(session={"instructions": "Answer in one short sentence."})
        item: ConversationItemParam = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Say hello."}],
        }
        await conn.conversation.item.create(item=item)
        await conn.response.create()
        async with asyncio.timeout(120):
            while not events or events[-1]["type"] != "response.done":
                event = json.loads(await conn.recv_bytes())
                validate(event, Generation.BETA)
                events.append(event)
    names = [e["type"] for e in events]
    assert in_order(
        names,
        "session.created",
        "session.updated",
        "conversation.item.created",
        "response.created",
        "response.audio.delta",
        "response.audio.done",
        "response.audio_transcript.done",
        "response.done",
    ), names
    assert not any(name.startswith("response.output_audio") for name in names)
    said = "".join(e["delta"] for e in events if e["type"] == "response.audio_transcript.delta")
    (done,) = [e for e in events if e["type"] == "response.audio_transcript.done"]
    assert said == done["transcript"] and said.strip()
