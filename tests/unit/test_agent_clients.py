"""The voice agent's session in the flows real clients run (issue 24), with no sockets and no models.

Each flow is one that LiveKit Agents, pipecat or OpenAI's Agents SDK sends (see
docs/compatibility.md): push-to-talk, `response.create` with metadata, out of band or with
its own input, history re-sent with audio and function calls, G.711 telephony audio, an
update with a value the server cannot take, and the items' lifecycle events. Every event
goes through the wire and the openai SDK's types (`Agent.events`).
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from dragoman.audio import g711
from dragoman.audio.pcm import float_to_pcm16
from dragoman.engines.llm.base import Finished, TextPiece, ToolCall
from dragoman.errors import EngineFailure
from dragoman.sessions.agent.jobs import ASR, LLM, TTS, LLMJob, SpeechJob
from tests.unit.test_agent_session import RATE, Agent, speak_turn, text_item, types
from tests.unit.test_transcription_session import b64, silence, tone

PUSH_TO_TALK = {"type": "realtime", "audio": {"input": {"turn_detection": None}}}


def push_to_talk_agent() -> Agent:
    agent = Agent()
    agent.events()
    agent.send("session.update", session=PUSH_TO_TALK)
    return agent


def test_push_to_talk_answers_the_committed_turn_once_it_is_transcribed() -> None:
    """The Agents SDK (`sendAudio(..., {commit: true})` then `requestResponse()`), LiveKit
    (`commit_user_turn()`) and pipecat commit and at once ask for the answer."""
    agent = push_to_talk_agent()
    agent.send("input_audio_buffer.append", audio=b64(tone(1.0, RATE)))
    agent.send("input_audio_buffer.commit")
    agent.send("response.create")
    agent.no_job(LLM)  # nothing to answer yet: the turn has no transcript
    agent.transcribe("What is the capital of France?")
    llm: LLMJob = agent.job(LLM)
    assert llm.request.messages[-1].role == "user"
    assert llm.request.messages[-1].content == "What is the capital of France?"
    agent.say(llm, "Paris.")
    agent.speak_all()
    assert types(agent.log).count("response.done") == 1, "the turn is answered once"
    agent.no_job(LLM)


def test_a_response_waits_for_every_turn_committed_before_it_only() -> None:
    agent = push_to_talk_agent()
    for _ in range(2):
        agent.send("input_audio_buffer.append", audio=b64(tone(0.6, RATE)))
        agent.send("input_audio_buffer.commit")
    agent.send("response.create")
    agent.transcribe("First.")
    agent.no_job(LLM)
    agent.send("input_audio_buffer.append", audio=b64(tone(0.6, RATE)))
    agent.send("input_audio_buffer.commit")  # after the response was created: not waited for
    agent.transcribe("Second.")
    llm: LLMJob = agent.job(LLM)
    assert [m.content for m in llm.request.messages if m.role == "user"] == ["First.", "Second."]


def test_a_waiting_response_can_be_cancelled_and_a_failed_transcript_releases_it() -> None:
    agent = push_to_talk_agent()
    agent.send("input_audio_buffer.append", audio=b64(tone(0.6, RATE)))
    agent.send("input_audio_buffer.commit")
    agent.send("response.create")
    (done,) = [e for e in agent.send("response.cancel") if e["type"] == "response.done"]
    assert done["response"]["status"] == "cancelled"
    agent.send("response.create")
    job = agent.job(ASR)
    agent.session.job_failed(job, EngineFailure("asr down", error_id="err_x"))
    agent.events()
    assert agent.session.next_job(LLM) is not None, "a turn that failed to transcribe waits no more"


# -- response.create: metadata, out of band, its own input ---------------------------------------


def finish(agent: Agent, *pieces: str | ToolCall) -> list[dict[str, Any]]:
    agent.say(agent.job(LLM), *pieces)
    agent.speak_all()
    return agent.log


def test_metadata_is_echoed_in_created_and_done() -> None:
    """LiveKit's `generate_reply()` waits for a response.created carrying its client_event_id."""
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Hi"))
    agent.send("response.create", response={"metadata": {"client_event_id": "evt_42"}})
    log = finish(agent, "Hello there.")
    created = next(e for e in log if e["type"] == "response.created")
    done = next(e for e in log if e["type"] == "response.done")
    assert created["response"]["metadata"] == {"client_event_id": "evt_42"}
    assert done["response"]["metadata"] == {"client_event_id": "evt_42"}


def test_an_out_of_band_response_stays_out_of_the_conversation() -> None:
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("I want a refund."))
    agent.log.clear()
    agent.send(
        "response.create",
        response={
            "conversation": "none",
            "output_modalities": ["text"],
            "instructions": "Classify the user's intent in one word.",
            "metadata": {"topic": "intent"},
        },
    )
    log = finish(agent, "refund")
    assert "conversation.item.added" not in types(log) and "conversation.item.done" not in types(log)
    done = log[-1]
    assert done["type"] == "response.done" and done["response"]["output"][0]["content"][0]["text"] == "refund"
    assert len(agent.session.conversation) == 1
    agent.send("response.create")
    assert all(m.content != "refund" for m in agent.job(LLM).request.messages)


def test_input_gives_a_response_its_own_context() -> None:
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Secret: the sky is green."))
    (added,) = [
        e
        for e in agent.send("conversation.item.create", item=text_item("Summarise me."))
        if e["type"] == "conversation.item.added"
    ]
    agent.send(
        "response.create",
        response={
            "conversation": "none",
            "input": [
                {"type": "item_reference", "id": added["item"]["id"]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Be short."}]},
            ],
        },
    )
    request = agent.job(LLM).request
    assert [m.content for m in request.messages if m.role == "user"] == ["Summarise me.", "Be short."]


def test_an_unknown_item_reference_is_refused() -> None:
    agent = Agent()
    agent.events()
    (error,) = agent.send(
        "response.create", response={"input": [{"type": "item_reference", "id": "item_nope"}]}
    )
    assert error["type"] == "error" and error["error"]["param"] == "response.input[0].id"
    agent.no_job(LLM)


# -- usage -------------------------------------------------------------------------------------


def test_response_done_usage_has_both_token_details() -> None:
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Hi"))
    agent.send("response.create")
    agent.say(
        agent.job(LLM),
        "Hello.",
        finished=Finished("stop", input_tokens=30, output_tokens=4, cached_tokens=20),
    )
    agent.speak_all()
    usage = agent.log[-1]["response"]["usage"]
    assert usage["input_token_details"]["cached_tokens"] == 20
    assert usage["input_token_details"]["text_tokens"] == 30
    assert usage["output_token_details"] == {"text_tokens": 4, "audio_tokens": 0}
    assert usage["total_tokens"] == 34


def test_a_response_cancelled_before_the_llm_ended_has_zero_usage() -> None:
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Hi"))
    agent.send("response.create")
    (done,) = [e for e in agent.send("response.cancel") if e["type"] == "response.done"]
    assert done["response"]["usage"]["input_token_details"]["cached_tokens"] == 0
    assert done["response"]["usage"]["total_tokens"] == 0


# -- conversation.item.create: audio, function calls, images, call ids ------------------------


def test_an_input_audio_item_is_transcribed_and_not_answered_by_itself() -> None:
    """The Agents SDK's `updateHistory()` re-sends the user's audio."""
    agent = Agent()
    agent.events()
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_audio", "audio": b64(tone(0.8, RATE))}],
    }
    (added,) = agent.send("conversation.item.create", item=item)
    assert added["type"] == "conversation.item.added"
    assert added["item"]["content"][0]["transcript"] is None
    agent.log.clear()
    agent.transcribe("Book a table for two.")
    assert types(agent.log) == [
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.done",
    ]
    assert agent.log[1]["item"]["content"][0]["transcript"] == "Book a table for two."
    agent.no_job(LLM)
    agent.send("response.create")
    assert agent.job(LLM).request.messages[-1].content == "Book a table for two."


def test_a_response_waits_for_an_input_audio_item_created_before_it() -> None:
    agent = Agent()
    agent.events()
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_audio", "audio": b64(tone(0.8, RATE))}],
    }
    agent.send("conversation.item.create", item=item)
    agent.send("response.create")
    agent.no_job(LLM)
    agent.transcribe("Hello?")
    assert agent.job(LLM).request.messages[-1].content == "Hello?"


def test_audio_parts_with_their_transcripts_join_the_history_as_text() -> None:
    agent = Agent()
    agent.events()
    user = {"type": "message", "role": "user", "content": [{"type": "input_audio", "transcript": "Hi there"}]}
    assistant = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_audio", "transcript": "Hello!"}],
    }
    for item in (user, assistant):
        assert types(agent.send("conversation.item.create", item=item)) == [
            "conversation.item.added",
            "conversation.item.done",
        ]
    agent.no_job(ASR)
    agent.send("conversation.item.create", item=text_item("And now?"))
    agent.send("response.create")
    messages = agent.job(LLM).request.messages
    assert [(m.role, m.content) for m in messages[-3:]] == [
        ("user", "Hi there"),
        ("assistant", "Hello!"),
        ("user", "And now?"),
    ]


def test_a_function_call_item_joins_the_history_and_its_output_then_matches() -> None:
    """LiveKit's `update_chat_ctx` (handoffs, restored context) sends function calls."""
    agent = Agent()
    agent.events()
    call = {
        "type": "function_call",
        "call_id": "call_abc",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert types(agent.send("conversation.item.create", item=call)) == [
        "conversation.item.added",
        "conversation.item.done",
    ]
    output = {"type": "function_call_output", "call_id": "call_abc", "output": '{"celsius": 3}'}
    assert agent.send("conversation.item.create", item=output)[0]["type"] == "conversation.item.added"
    agent.send("response.create")
    messages = agent.job(LLM).request.messages
    assert messages[-2].tool_calls[0].call_id == "call_abc" and messages[-1].tool_call_id == "call_abc"


def test_an_image_is_refused_with_a_clear_reason() -> None:
    agent = Agent()
    agent.events()
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}],
    }
    (error,) = agent.send("conversation.item.create", item=item)
    assert error["error"]["param"] == "item.content[0].type"
    assert "cannot see" in error["error"]["message"]
    assert len(agent.session.conversation) == 0


def test_tool_call_ids_are_openai_shaped_whatever_the_llm_named_them() -> None:
    agent = Agent()
    agent.events()
    agent.send(
        "session.update", session={"type": "realtime", "tools": [{"type": "function", "name": "lookup"}]}
    )
    agent.send("conversation.item.create", item=text_item("Look it up."))
    agent.send("response.create")
    upstream = "chatcmpl-tool-" + "9" * 40
    log = finish(agent, ToolCall(upstream, "lookup", "{}"))
    (args,) = [e for e in log if e["type"] == "response.function_call_arguments.done"]
    assert args["call_id"] != upstream and len(args["call_id"]) <= 32 and args["call_id"].startswith("call_")
    output = {"type": "function_call_output", "call_id": args["call_id"], "output": "42"}
    assert agent.send("conversation.item.create", item=output)[0]["type"] == "conversation.item.added"


# -- session.update: G.711, and the values that cannot be applied -------------------------------


@pytest.mark.parametrize(("ga", "law"), [("audio/pcmu", "pcmu"), ("audio/pcma", "pcma")])
def test_g711_both_ways(ga: str, law: g711.Law) -> None:
    """Telephony clients (Twilio, SIP) send and play G.711 at 8 kHz."""
    agent = Agent()
    agent.events()
    audio = {"input": {"format": {"type": ga}}, "output": {"format": {"type": ga}}}
    (updated,) = agent.send("session.update", session={"type": "realtime", "audio": audio})
    assert updated["session"]["audio"]["input"]["format"] == {"type": ga}
    assert updated["session"]["audio"]["output"]["format"] == {"type": ga}
    pcm = float_to_pcm16(np.concatenate([tone(1.0, 8000), silence(0.8, 8000)]))
    payload = base64.b64encode(g711.from_pcm16(pcm, law)).decode()
    agent.send("input_audio_buffer.append", audio=payload)
    assert "input_audio_buffer.committed" in types(agent.log), "G.711 speech is heard as speech"
    agent.transcribe("Hello from the phone.")
    llm: LLMJob = agent.job(LLM)
    agent.session.job_progress(llm, TextPiece("Hi."))
    agent.session.job_done(llm, Finished("stop", 10, 2, 0))
    speech: SpeechJob = agent.job(TTS)
    assert speech.request.rate == 8000
    spoken = float_to_pcm16(tone(0.1, 8000))
    agent.session.job_progress(speech, spoken)
    (delta,) = [e for e in agent.events() if e["type"] == "response.output_audio.delta"]
    sent = base64.b64decode(delta["delta"])
    assert sent == g711.from_pcm16(spoken, law), "one G.711 byte per sample"


def test_beta_names_g711_too() -> None:
    from dragoman.protocol.realtime.generation import Generation

    agent = Agent(generation=Generation.BETA)
    agent.events()
    (updated,) = agent.send(
        "session.update", session={"input_audio_format": "g711_ulaw", "output_audio_format": "g711_alaw"}
    )
    assert updated["session"]["input_audio_format"] == "g711_ulaw"
    assert updated["session"]["output_audio_format"] == "g711_alaw"


def test_an_update_applies_what_it_can_and_refuses_only_the_value_it_cannot() -> None:
    """The Agents SDK asks for semantic_vad; without the turn model that value alone is refused."""
    agent = Agent()  # no turn model
    agent.events()
    tools = [{"type": "function", "name": "lookup"}]
    turns = {"type": "semantic_vad"}
    events = agent.send(
        "session.update",
        event_id="evt_update",
        session={
            "type": "realtime",
            "instructions": "Be kind.",
            "tools": tools,
            "audio": {"input": {"turn_detection": turns}},
        },
    )
    assert types(events) == ["error", "session.updated"]
    assert events[0]["error"]["param"] == "session.turn_detection.type"
    assert events[0]["error"]["event_id"] == "evt_update"
    session = events[1]["session"]
    assert session["instructions"] == "Be kind." and session["tools"][0]["name"] == "lookup"
    assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"


# -- the items' lifecycle ---------------------------------------------------------------------------


def test_a_client_item_is_added_then_done() -> None:
    agent = Agent()
    agent.events()
    added, done = agent.send("conversation.item.create", item=text_item("Hi"))
    assert (added["type"], done["type"]) == ("conversation.item.added", "conversation.item.done")
    assert done["item"] == added["item"]


def test_a_spoken_turn_follows_the_previous_conversation_item_and_is_done_with_its_transcript() -> None:
    agent = Agent()
    agent.events()
    agent.send(
        "session.update",
        session={
            "type": "realtime",
            "audio": {"input": {"turn_detection": {"type": "server_vad", "create_response": False}}},
        },
    )
    (added, _) = agent.send("conversation.item.create", item=text_item("Context."))
    agent.log.clear()
    speak_turn(agent, "Hello.")
    committed = next(e for e in agent.log if e["type"] == "input_audio_buffer.committed")
    item_added = next(e for e in agent.log if e["type"] == "conversation.item.added")
    assert committed["previous_item_id"] == added["item"]["id"] == item_added["previous_item_id"]
    done = next(e for e in agent.log if e["type"] == "conversation.item.done")
    assert done["item"]["id"] == committed["item_id"]
    assert done["item"]["content"][0]["transcript"] == "Hello."
    assert types(agent.log).index("conversation.item.done") > types(agent.log).index(
        "conversation.item.input_audio_transcription.completed"
    )


def test_content_parts_carry_no_null_fields() -> None:
    """The Agents SDK's zod schemas take a null where OpenAI omits the field as an unknown event."""
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Hi"))
    agent.send("response.create")
    log = finish(agent, "Hello there.")
    parts = [e["part"] for e in log if e["type"].startswith("response.content_part.")]
    assert parts and all(None not in part.values() for part in parts)
    assert all(set(part) == {"type", "transcript"} for part in parts)


def test_a_failed_transcription_has_no_null_param() -> None:
    agent = Agent()
    agent.events()
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.8, RATE)])))
    job = agent.job(ASR)
    agent.session.job_failed(job, EngineFailure("asr down", error_id="err_y"))
    (failed,) = [
        e for e in agent.events() if e["type"] == "conversation.item.input_audio_transcription.failed"
    ]
    assert "param" not in failed["error"]
    assert "conversation.item.done" in types(agent.log)
