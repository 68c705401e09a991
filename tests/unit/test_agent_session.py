"""The voice agent's session state machine, with no sockets and no models.

Client events go in as raw JSON through the protocol parser, and every event the
session says is written as the wire dict and checked against the openai SDK's
types. The engines are played by the test: it takes each lane's job and hands back
the pieces a real engine would stream.
"""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pytest

from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, PrefixMode, StepResult
from dragoman.engines.llm.base import Finished, TextPiece, ToolCall, ToolCallPiece
from dragoman.engines.workers import JobCancelled
from dragoman.errors import EngineFailure
from dragoman.protocol.realtime.agent_events import agent_wire_event
from dragoman.protocol.realtime.client_parsers import AgentClientParser
from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.events import Message
from dragoman.sessions.agent.jobs import ASR, LLM, TTS, LLMJob, SpeechJob
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.agent.session import AgentSession
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import StepJob
from tests.unit.fakes import EnergyVAD, WordTokenizer
from tests.unit.realtime_sdk import validate
from tests.unit.test_transcription_session import b64, silence, tone

GA = Generation.GA
RATE = 24_000
DONE = Finished("stop", input_tokens=30, output_tokens=12, cached_tokens=0)


class Agent:
    """An agent session behind the protocol: JSON in, validated wire dicts out."""

    def __init__(
        self, vad: bool = True, generation: Generation = GA, turn_model: Any = None, tool_preamble: str = ""
    ) -> None:
        profile = EngineProfile(
            name="fake-asr",
            capabilities=ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT),
            tokenizer=WordTokenizer(),
            max_item_seconds=300.0,
        )
        limits = AgentLimits(
            model_name="fake-llm",
            speech=SessionConfig.defaults(TranscriptionSettings(), 24_000),
            tool_preamble=tool_preamble,
        )
        self.session = AgentSession(
            "sess_agent",
            profile,
            AgentConfig(),
            limits,
            EnergyVAD if vad else None,
            _voices,
            turn_model_factory=(lambda: turn_model) if turn_model is not None else None,
        )
        self.parser = AgentClientParser(generation)
        self.log: list[dict[str, Any]] = []

    def send(self, type_: str, /, **body: Any) -> list[dict[str, Any]]:
        self.session.receive(self.parser.parse(json.dumps({"type": type_, **body})))
        return self.events()

    def events(self) -> list[dict[str, Any]]:
        wire = [agent_wire_event(e, self.parser.generation) for e in self.session.events_to_send()]
        events = [event for event in wire if event is not None]
        for event in events:
            validate(event, self.parser.generation)
        self.log += events
        return events

    def job(self, lane: str) -> Any:
        job = self.session.next_job(lane)
        assert job is not None, f"no {lane} job"
        return job

    def no_job(self, lane: str) -> None:
        assert self.session.next_job(lane) is None

    def say(self, job: LLMJob, *pieces: str | ToolCall, finished: Finished = DONE) -> list[dict[str, Any]]:
        for piece in pieces:
            item = TextPiece(piece) if isinstance(piece, str) else ToolCallPiece(piece)
            self.session.job_progress(job, item)
        self.session.job_done(job, finished)
        return self.events()

    def speak(self, seconds: float = 0.5) -> tuple[SpeechJob, list[dict[str, Any]]]:
        job: SpeechJob = self.job(TTS)
        self.session.job_progress(job, b"\x01\x00" * int(seconds * job.request.rate))
        self.session.job_done(job, None)
        return job, self.events()

    def speak_all(self) -> list[str]:
        """Speak every clause the response has; their texts in order."""
        said = []
        while (job := self.session.next_job(TTS)) is not None:
            assert isinstance(job, SpeechJob)
            self.session.job_progress(job, b"\x00\x00" * 2400)
            self.session.job_done(job, None)
            said.append(job.request.text)
        self.events()
        return said

    def transcribe(self, text: str) -> list[dict[str, Any]]:
        job: StepJob = self.job(ASR)
        self.session.job_done(job, StepResult(text=text, language="en"))
        return self.events()


def _voices(name: str | None) -> str:
    known = {"alloy": "hibari", "hibari": "hibari", "joe": "joe"}
    if name is None:
        return "hibari"
    if name not in known:
        from dragoman.errors import InvalidValue

        raise InvalidValue(f"unknown voice {name!r}", param="session.audio.output.voice")
    return known[name]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# -- session settings ------------------------------------------------------------------


def test_created_then_updates_merge_field_by_field() -> None:
    agent = Agent()
    (created,) = agent.events()
    assert created["type"] == "session.created"
    assert created["session"]["audio"]["output"]["voice"] == "hibari"
    agent.send("session.update", session={"type": "realtime", "instructions": "Be brief."})
    (updated,) = agent.send(
        "session.update", session={"type": "realtime", "audio": {"output": {"voice": "joe"}}}
    )
    assert updated["type"] == "session.updated"
    assert updated["session"]["instructions"] == "Be brief.", "an update merges; it never resets"
    assert updated["session"]["audio"]["output"]["voice"] == "joe"


def test_an_unknown_voice_is_an_error_and_changes_nothing() -> None:
    agent = Agent()
    agent.events()
    (error,) = agent.send(
        "session.update", session={"type": "realtime", "audio": {"output": {"voice": "zz"}}}
    )
    assert error["type"] == "error" and error["error"]["param"] == "session.audio.output.voice"
    assert agent.session.config.voice == "hibari"


def test_a_transcription_session_is_the_wrong_session_type() -> None:
    agent = Agent()
    agent.events()
    (error,) = agent.send("session.update", session={"type": "transcription"})
    assert error["error"]["code"] == "invalid_session_type"


def test_malformed_events_are_errors_and_the_session_lives_on() -> None:
    agent = Agent()
    agent.events()
    for raw in ("{not json", json.dumps({"type": "response.explode"}), json.dumps({"type": 3})):
        agent.session.receive(agent.parser.parse(raw))
        (error,) = agent.events()
        assert error["type"] == "error"
        assert error["error"]["code"] == "unknown_or_invalid_event"
    (added, _) = agent.send("conversation.item.create", item=text_item("still here?"))
    assert added["type"] == "conversation.item.added"


def test_output_audio_buffer_clear_is_for_webrtc() -> None:
    agent = Agent()
    agent.events()
    (error,) = agent.send("output_audio_buffer.clear")
    assert error["error"]["code"] == "invalid_event_for_transport"


# -- items and responses -------------------------------------------------------------------


def test_item_create_adds_context_and_never_starts_generation() -> None:
    agent = Agent()
    agent.events()
    (added, _) = agent.send("conversation.item.create", item=text_item("My name is Ada."))
    assert added["item"]["content"][0]["text"] == "My name is Ada."
    agent.no_job(LLM)
    agent.send("response.create")
    job: LLMJob = agent.job(LLM)
    assert job.request.messages[-1].content == "My name is Ada."


def test_a_normal_response_in_order_and_its_transcript_is_its_deltas() -> None:
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Hello?"))
    assert agent.send("response.create") == [], "response.created waits for the first audio"
    llm: LLMJob = agent.job(LLM)
    agent.session.job_progress(llm, TextPiece("Hello there. "))
    assert agent.events() == [], "nothing goes out before audio"
    _, first = agent.speak()
    assert types(first)[:5] == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_audio_transcript.delta",
    ]
    assert set(types(first)[5:]) == {"response.output_audio.delta"}
    tail = agent.say(llm, "How are", " you today?")
    assert tail == [], "the rest waits for its speech"
    _, last = agent.speak()
    assert types(last) == [
        "response.output_audio_transcript.delta",
        *["response.output_audio.delta"] * 3,
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    deltas = "".join(e["delta"] for e in agent.log if e["type"] == "response.output_audio_transcript.delta")
    (done,) = [e for e in agent.log if e["type"] == "response.output_audio_transcript.done"]
    assert deltas == done["transcript"] == "Hello there. How are you today?"
    response = last[-1]["response"]
    assert response["status"] == "completed"
    assert response["usage"]["output_tokens"] == 12
    assert response["output"][0]["content"][0]["transcript"] == done["transcript"]


def test_a_second_response_create_while_one_is_active_is_refused() -> None:
    agent = Agent()
    agent.events()
    agent.send("response.create")
    (error,) = agent.send("response.create")
    assert error["error"]["code"] == "conversation_already_has_active_response"
    # The active response is the first fault, before the request's own settings are read.
    (error,) = agent.send("response.create", response={"audio": {"output": {"voice": "nobody"}}})
    assert error["error"]["code"] == "conversation_already_has_active_response"
    llm: LLMJob = agent.job(LLM)
    agent.say(llm, "Fine.")
    agent.speak_all()
    assert agent.log[-1]["type"] == "response.done", "the first response goes on unharmed"


def test_response_cancel_closes_with_the_partial_transcript_and_stops_the_work() -> None:
    agent = Agent()
    agent.events()
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    agent.session.job_progress(llm, TextPiece("The first clause is here. The second is next. "))
    agent.speak()
    speech: SpeechJob = agent.job(TTS)
    events = agent.send("response.cancel")
    assert types(events) == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert events[1]["transcript"] == "The first clause is here."
    assert events[-1]["response"]["status"] == "cancelled"
    assert events[-1]["response"]["status_details"]["reason"] == "client_cancelled"
    assert llm.cancel.cancelled and speech.cancel.cancelled, "cancelled work stops"
    # What the superseded generation still sends is dropped...
    agent.session.job_progress(speech, b"\x00\x00" * 100)
    agent.session.job_progress(llm, TextPiece("more words. "))
    agent.session.job_done(llm, DONE)
    assert agent.events() == []
    agent.no_job(TTS)
    # ...and the next response's always passes.
    agent.send("response.create")
    again: LLMJob = agent.job(LLM)
    agent.say(again, "Yes.")
    assert agent.speak_all() == ["Yes."]
    assert agent.log[-1]["response"]["status"] == "completed"


def test_cancel_with_nothing_in_progress_is_an_error() -> None:
    agent = Agent()
    agent.events()
    (error,) = agent.send("response.cancel")
    assert error["error"]["code"] == "response_cancel_not_active"


def test_a_response_cancelled_before_any_output_still_opens_and_closes() -> None:
    agent = Agent()
    agent.events()
    agent.send("response.create")
    agent.job(LLM)
    assert types(agent.send("response.cancel")) == ["response.created", "response.done"]


def test_text_only_responses_have_text_events_and_no_speech() -> None:
    agent = Agent()
    agent.events()
    agent.send("response.create", response={"output_modalities": ["text"]})
    llm: LLMJob = agent.job(LLM)
    events = agent.say(llm, "Two", " words.")
    agent.no_job(TTS)
    assert types(events) == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert events[6]["text"] == "Two words."


def test_instructions_updated_mid_session_shape_the_next_response() -> None:
    agent = Agent()
    agent.events()
    agent.send("session.update", session={"type": "realtime", "instructions": "Answer in French."})
    agent.send("response.create")
    assert agent.job(LLM).request.messages[0].content == "Answer in French."
    agent.send("response.cancel")
    agent.send("session.update", session={"type": "realtime", "instructions": "Answer in German."})
    agent.send("response.create", response={"instructions": "Only this once: Italian."})
    assert agent.job(LLM).request.messages[0].content == "Only this once: Italian."
    agent.send("response.cancel")
    agent.send("response.create")
    assert agent.job(LLM).request.messages[0].content == "Answer in German."


def test_a_failed_llm_call_fails_the_response_and_the_session_goes_on() -> None:
    agent = Agent()
    agent.events()
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    agent.session.job_failed(llm, EngineFailure("boom", error_id="err_1"))
    (_created, done) = agent.events()
    assert done["response"]["status"] == "failed"
    assert "err_1" in done["response"]["status_details"]["error"]["message"]
    agent.send("response.create")
    agent.job(LLM)


# -- tools -------------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_a_tool_call_comes_after_its_spoken_lead_in_and_its_output_feeds_the_next_response() -> None:
    agent = Agent()
    agent.events()
    agent.send("session.update", session={"type": "realtime", "tools": [WEATHER]})
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    assert [tool.name for tool in llm.request.tools] == ["get_weather"]
    call = ToolCall("call_abc", "get_weather", '{"city": "Paris"}')
    finished = Finished("tool_calls", 40, 20, 0)
    assert agent.say(llm, "Let me check.", call, finished=finished) == [], "the lead-in is spoken first"
    agent.speak_all()
    kinds = types(agent.log)
    assert kinds.index("response.output_audio.done") < kinds.index("response.function_call_arguments.done")
    (args,) = [e for e in agent.log if e["type"] == "response.function_call_arguments.done"]
    assert (args["name"], json.loads(args["arguments"])) == ("get_weather", {"city": "Paris"})
    call_id = args["call_id"]
    assert call_id.startswith("call_") and len(call_id) <= 32, "OpenAI-shaped, whatever the LLM named it"
    done = agent.log[-1]["response"]
    assert [item["type"] for item in done["output"]] == ["message", "function_call"]
    # The client runs the tool, adds its output and asks for the answer.
    output = {"type": "function_call_output", "call_id": call_id, "output": '{"sky": "clear"}'}
    (added, _) = agent.send("conversation.item.create", item=output)
    assert added["item"]["type"] == "function_call_output"
    agent.no_job(LLM)
    agent.send("response.create")
    messages = agent.job(LLM).request.messages
    assert messages[-2].tool_calls[0].call_id == call_id
    assert messages[-2].content == "Let me check."
    assert (messages[-1].role, messages[-1].tool_call_id) == ("tool", call_id)


def test_output_for_an_unknown_call_is_refused() -> None:
    agent = Agent()
    agent.events()
    output = {"type": "function_call_output", "call_id": "call_nope", "output": "{}"}
    (error,) = agent.send("conversation.item.create", item=output)
    assert error["error"]["param"] == "item.call_id"


def test_a_cancelled_response_makes_no_tool_call() -> None:
    agent = Agent()
    agent.events()
    agent.send("session.update", session={"type": "realtime", "tools": [WEATHER]})
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    agent.say(llm, "Checking now.", ToolCall("call_x", "get_weather", '{"city": "Oslo"}'))
    agent.send("response.cancel")
    assert "response.function_call_arguments.done" not in types(agent.log)


# -- turns and barge-in ------------------------------------------------------------------


def speak_turn(agent: Agent, text: str) -> None:
    """A spoken turn: speech, then enough silence for server VAD to end it, then its transcript."""
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.8, RATE)])))
    agent.transcribe(text)


def test_a_spoken_turn_is_transcribed_and_answered() -> None:
    agent = Agent()
    agent.events()
    speak_turn(agent, "What time is it?")
    kinds = types(agent.log)
    assert kinds[1:6] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.input_audio_transcription.completed",
    ]
    completed = agent.log[5]
    assert completed["transcript"] == "What time is it?"
    assert completed["usage"]["type"] == "duration"
    llm: LLMJob = agent.job(LLM)
    assert llm.request.messages[-1].content == "What time is it?"


def barge_in_setup(interrupt: bool) -> tuple[Agent, LLMJob]:
    agent = Agent()
    agent.events()
    if not interrupt:
        turns = {"type": "server_vad", "interrupt_response": False}
        agent.send(
            "session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turns}}}
        )
    speak_turn(agent, "Tell me a story.")
    llm: LLMJob = agent.job(LLM)
    agent.session.job_progress(llm, TextPiece("Once upon a time, there was a fox. It lived "))
    agent.speak()
    agent.log.clear()
    return agent, llm


def test_barge_in_closes_the_response_before_speech_started() -> None:
    agent, llm = barge_in_setup(interrupt=True)
    speech: SpeechJob = agent.job(TTS)
    agent.send("input_audio_buffer.append", audio=b64(tone(0.8, RATE)))
    assert types(agent.log) == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "input_audio_buffer.speech_started",
    ]
    assert agent.log[1]["transcript"] == "Once upon a time,", "what was spoken up to the cut"
    assert agent.log[5]["response"]["status_details"]["reason"] == "turn_detected"
    assert llm.cancel.cancelled and speech.cancel.cancelled


def test_with_interrupt_response_off_the_response_plays_on_and_the_turn_is_answered_after() -> None:
    agent, llm = barge_in_setup(interrupt=False)
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.8, RATE)])))
    assert "response.done" not in types(agent.log)
    assert "input_audio_buffer.speech_started" in types(agent.log)
    agent.transcribe("And then?")
    assert "conversation.item.input_audio_transcription.completed" in types(agent.log)
    agent.say(llm, "a happy life.")
    agent.speak_all()
    assert agent.log[-1]["type"] == "response.done"
    assert agent.log[-1]["response"]["status"] == "completed"
    assert agent.job(LLM).request.messages[-1].content == "And then?", "the waiting turn is answered next"


@pytest.mark.parametrize("create_response", [True, False])
def test_create_response_false_leaves_the_answer_to_the_client(create_response: bool) -> None:
    agent = Agent()
    agent.events()
    turns = {"type": "server_vad", "create_response": create_response}
    agent.send("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turns}}})
    speak_turn(agent, "Hello.")
    assert (agent.session.next_job(LLM) is not None) == create_response


# -- the early start -----------------------------------------------------------------------


def early_agent() -> Agent:
    agent = Agent()
    agent.events()
    return agent


def pause_then_provisional(agent: Agent, text: str) -> None:
    """Speech, then a pause: the front decodes the turn whole."""
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.3, RATE)])))
    job: StepJob = agent.job(ASR)
    assert job.provisional
    agent.session.job_done(job, StepResult(text=text, language="en"))
    agent.events()


def test_an_early_start_is_held_until_the_turn_ends_and_then_comes_in_order() -> None:
    agent = early_agent()
    pause_then_provisional(agent, "What is the time?")
    llm: LLMJob = agent.job(LLM)
    assert llm.request.messages[-1].content == "What is the time?"
    agent.say(llm, "It is noon.")
    agent.speak_all()
    assert "response.created" not in types(agent.log), "held while the user might go on"
    agent.send("input_audio_buffer.append", audio=b64(silence(0.5, RATE)))
    # No speech came back: the pause's decode heard the whole turn, and completes it.
    agent.no_job(ASR)
    agent.events()
    kinds = types(agent.log)
    (completed,) = [e for e in agent.log if e["type"].endswith("input_audio_transcription.completed")]
    assert completed["transcript"] == "What is the time?"
    assert kinds.index("conversation.item.input_audio_transcription.completed") < kinds.index(
        "response.created"
    )
    assert kinds[-1] == "response.done" and agent.log[-1]["response"]["status"] == "completed"
    (turn, answer) = [e for e in agent.log if e["type"] == "conversation.item.added"]
    assert answer["previous_item_id"] == turn["item"]["id"], "the answer follows the turn"
    assert [cast(Message, item).role for item in agent.session.conversation.items] == ["user", "assistant"]
    agent.no_job(LLM)


def test_semantic_vad_starts_early_too_and_its_turn_needs_no_second_decode() -> None:
    model_calls: list[int] = []

    def turn_model(audio: np.ndarray) -> float:
        model_calls.append(len(audio))
        return 0.9  # complete: the turn ends at the 200 ms pause

    agent = Agent(turn_model=turn_model)
    agent.events()
    turns = {"type": "semantic_vad"}
    agent.send("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turns}}})
    # Speech, then the first silent windows: the pause is decoded before the turn model is asked.
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.1, RATE)])))
    job: StepJob = agent.job(ASR)
    assert job.provisional and model_calls == []
    agent.session.job_done(job, StepResult(text="What is the time?", language="en"))
    agent.events()
    llm: LLMJob = agent.job(LLM)
    assert llm.request.messages[-1].content == "What is the time?", "answered before the turn ends"
    agent.say(llm, "It is noon.")
    agent.speak_all()
    assert "response.created" not in types(agent.log), "held while the user might go on"
    agent.send("input_audio_buffer.append", audio=b64(silence(0.3, RATE)))
    assert len(model_calls) == 1, "the turn model ended the turn"
    agent.no_job(ASR)  # the pause's decode heard the whole turn
    agent.events()
    kinds = types(agent.log)
    assert kinds.index("input_audio_buffer.speech_stopped") < kinds.index("response.created")
    assert kinds[-1] == "response.done" and agent.log[-1]["response"]["status"] == "completed"


def test_speech_after_the_pause_drops_the_early_start_unseen() -> None:
    agent = early_agent()
    pause_then_provisional(agent, "Book a table")
    llm: LLMJob = agent.job(LLM)
    agent.session.job_progress(llm, TextPiece("Sure, for how many people? "))
    agent.send("input_audio_buffer.append", audio=b64(tone(0.6, RATE)))
    assert llm.cancel.cancelled
    agent.no_job(TTS)
    agent.send("input_audio_buffer.append", audio=b64(silence(0.8, RATE)))
    agent.transcribe("Book a table for two.")
    assert not [k for k in types(agent.log) if k.startswith("response.")], "the client never saw it"
    again: LLMJob = agent.job(LLM)
    assert again.request.messages[-1].content == "Book a table for two."


def test_speech_after_the_early_decode_makes_the_turn_decode_again() -> None:
    """The pause's decode stands for the turn only while no speech came after it."""
    agent = early_agent()
    pause_then_provisional(agent, "Call Anna")
    first: LLMJob = agent.job(LLM)
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(0.6, RATE), silence(0.8, RATE)])))
    assert first.cancel.cancelled
    final: StepJob = agent.job(ASR)
    assert final.final and not final.provisional
    assert len(final.request.audio) > 2 * 16_000, "the speech after the pause (at 1.3 s) is decoded too"
    agent.session.job_done(final, StepResult(text="Call Anna and Hannah", language="en"))
    agent.events()
    second: LLMJob = agent.job(LLM)
    assert second.request.messages[-1].content == "Call Anna and Hannah"


def test_a_pause_is_decoded_the_moment_it_begins_and_its_transcript_starts_the_answer() -> None:
    agent = early_agent()
    # 100 ms of silence (a few VAD windows), long before the 500 ms that end the turn.
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.1, RATE)])))
    job: StepJob = agent.job(ASR)
    assert job.provisional and not job.final
    assert len(job.request.audio) >= 16_000, "the whole turn, its speech all in"
    agent.session.job_done(job, StepResult(text="What time is it?", language="en"))
    assert agent.job(LLM).request.messages[-1].content == "What time is it?", "at once, not at 200 ms"
    assert not [k for k in types(agent.events()) if k.startswith("response.")], "held"


def test_a_pause_cancels_a_partial_step_that_has_not_started() -> None:
    agent = early_agent()
    transcription = {"transcription": {"model": "whisper-1"}}
    agent.send("session.update", session={"type": "realtime", "audio": {"input": transcription}})
    agent.send("input_audio_buffer.append", audio=b64(tone(2.2, RATE)))
    partial: StepJob = agent.job(ASR)
    assert not partial.provisional
    agent.send("input_audio_buffer.append", audio=b64(silence(0.1, RATE)))
    assert partial.cancel.cancelled, "the pause's decode hears all it would, and more"
    agent.session.job_failed(partial, JobCancelled("cancelled before it ran"))
    pause: StepJob = agent.job(ASR)
    assert pause.provisional and len(pause.request.audio) > len(partial.request.audio)


def test_speech_after_a_pause_cancels_its_decode_and_the_next_pause_decodes_again() -> None:
    agent = early_agent()
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.1, RATE)])))
    stale: StepJob = agent.job(ASR)
    agent.send("input_audio_buffer.append", audio=b64(tone(0.5, RATE)))
    assert stale.cancel.cancelled
    agent.session.job_failed(stale, JobCancelled("cancelled before it ran"))
    agent.no_job(LLM)
    agent.send("input_audio_buffer.append", audio=b64(silence(0.1, RATE)))
    again: StepJob = agent.job(ASR)
    assert again.provisional and again.resumes == 1
    agent.session.job_done(again, StepResult(text="Call Anna now", language="en"))
    assert agent.job(LLM).request.messages[-1].content == "Call Anna now"


def test_a_transcript_that_arrives_while_the_user_speaks_again_waits_for_their_next_turn() -> None:
    agent = Agent()
    agent.events()
    agent.send("input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0, RATE), silence(0.8, RATE)])))
    first: StepJob = agent.job(ASR)
    agent.send("input_audio_buffer.append", audio=b64(tone(0.8, RATE)))  # the user goes on
    agent.session.job_done(first, StepResult(text="Turn left.", language="en"))
    agent.events()
    agent.no_job(LLM)
    agent.send("input_audio_buffer.append", audio=b64(silence(0.8, RATE)))
    agent.transcribe("No, right.")
    messages = agent.job(LLM).request.messages
    assert [m.content for m in messages if m.role == "user"] == ["Turn left.", "No, right."]


def test_the_tool_lead_in_is_asked_for_only_when_tools_may_be_called() -> None:
    agent = Agent(tool_preamble="Say what you do first.")
    agent.events()
    agent.send("session.update", session={"type": "realtime", "instructions": "Be kind."})
    agent.send("response.create")
    assert agent.job(LLM).request.messages[0].content == "Be kind."
    agent.send("response.cancel")
    agent.send("session.update", session={"type": "realtime", "tools": [WEATHER]})
    agent.send("response.create")
    content = "Be kind.\n\nSay what you do first.\nYour tools: get_weather: The weather in a city."
    assert agent.job(LLM).request.messages[0].content == content, "the preamble names each tool's use"
    agent.send("response.cancel")
    agent.send("response.create", response={"tool_choice": "none"})
    assert agent.job(LLM).request.messages[0].content == "Be kind."


# -- conversation.item.retrieve / .delete / .truncate ------------------------------------


def answer_item(agent: Agent, clauses: list[str], seconds: float = 0.5) -> str:
    agent.send("conversation.item.create", item=text_item("Tell me."))
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    for clause in clauses:
        agent.session.job_progress(llm, TextPiece(clause + " "))
    agent.session.job_done(llm, DONE)
    agent.events()
    while (job := agent.session.next_job(TTS)) is not None:
        assert isinstance(job, SpeechJob)
        agent.session.job_progress(job, b"\x01\x00" * int(seconds * job.request.rate))
        agent.session.job_done(job, None)
    (done,) = [e for e in agent.events() if e["type"] == "response.done"]
    assert done["response"]["status"] == "completed"
    return str(done["response"]["output"][0]["id"])


def test_retrieve_gives_the_item_and_an_unknown_id_is_an_error() -> None:
    agent = Agent()
    agent.events()
    (added, _) = agent.send("conversation.item.create", item=text_item("Hi."))
    (got,) = agent.send("conversation.item.retrieve", item_id=added["item"]["id"], event_id="e1")
    assert got["type"] == "conversation.item.retrieved"
    assert got["item"]["content"][0]["text"] == "Hi."
    (error,) = agent.send("conversation.item.retrieve", item_id="item_nope", event_id="e2")
    assert error["type"] == "error" and error["error"]["param"] == "item_id"
    assert error["error"]["event_id"] == "e2"


def test_delete_takes_the_item_out_of_the_llm_view() -> None:
    agent = Agent()
    agent.events()
    (secret, _) = agent.send("conversation.item.create", item=text_item("The code is 42."))
    agent.send("conversation.item.create", item=text_item("What is the code?"))
    (deleted,) = agent.send("conversation.item.delete", item_id=secret["item"]["id"])
    assert deleted == {**deleted, "type": "conversation.item.deleted", "item_id": secret["item"]["id"]}
    agent.send("response.create")
    job: LLMJob = agent.job(LLM)
    assert [m.content for m in job.request.messages if m.role == "user"] == ["What is the code?"]
    (error,) = agent.send("conversation.item.delete", item_id=secret["item"]["id"])
    assert error["type"] == "error", "deleted once, gone"


def test_truncate_keeps_the_clauses_heard_and_the_llm_sees_only_those() -> None:
    agent = Agent()
    agent.events()
    item_id = answer_item(agent, ["First clause here.", "Second one now.", "Third at last."], seconds=0.5)
    (cut,) = agent.send("conversation.item.truncate", item_id=item_id, content_index=0, audio_end_ms=700)
    assert cut == {**cut, "type": "conversation.item.truncated", "item_id": item_id, "audio_end_ms": 700}
    (got,) = agent.send("conversation.item.retrieve", item_id=item_id)
    assert got["item"]["content"][0]["transcript"] == "First clause here. Second one now."
    agent.send("conversation.item.create", item=text_item("Go on."))
    agent.send("response.create")
    job: LLMJob = agent.job(LLM)
    assert job.request.messages[-2].content == "First clause here. Second one now."
    agent.send("response.cancel")
    agent.events()
    (past,) = agent.send("conversation.item.truncate", item_id=item_id, content_index=0, audio_end_ms=900)
    assert past["type"] == "error" and past["error"]["param"] == "audio_end_ms", "the audio now ends at 700"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"content_index": 1}, "content_index"),
        ({"audio_end_ms": 5000}, "audio_end_ms"),
        ({"audio_end_ms": -1}, None),
        ({"item_id": "user"}, "item_id"),
    ],
)
def test_truncate_refuses_what_openai_refuses(change: dict[str, Any], param: str | None) -> None:
    agent = Agent()
    agent.events()
    (user, _) = agent.send("conversation.item.create", item=text_item("Hi."))
    item_id = answer_item(agent, ["Hello there."], seconds=0.5)
    body = {"item_id": item_id, "content_index": 0, "audio_end_ms": 100} | change
    if body["item_id"] == "user":
        body["item_id"] = user["item"]["id"]
    (error,) = agent.send("conversation.item.truncate", **body)
    assert error["type"] == "error"
    if param is not None:
        assert error["error"]["param"] == param


def test_items_of_the_response_in_progress_are_not_edited() -> None:
    agent = Agent()
    agent.events()
    agent.send("conversation.item.create", item=text_item("Hello?"))
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    agent.session.job_progress(llm, TextPiece("Hello there. "))
    _, first = agent.speak()
    (added,) = [e for e in first if e["type"] == "response.output_item.added"]
    (error,) = agent.send("conversation.item.delete", item_id=added["item"]["id"])
    assert error["type"] == "error" and "response.cancel" in error["error"]["message"]
