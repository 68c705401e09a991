"""server_vad's `idle_timeout_ms`: the pure segmenter's timer on the audio timeline, the
`input_audio_buffer.timeout_triggered` event and its committed item in a transcription session,
and the voice agent's answer to it, held while it answers and run again after its audio."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dragoman.engines.asr.base import StepResult
from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.agent.jobs import LLM, TTS, LLMJob
from dragoman.streaming.turns import IdleTimeout, ServerVADConfig, SpeechStarted, SpeechStopped, TurnSegmenter
from tests.unit.fakes import EnergyVAD
from tests.unit.realtime_sdk import validate
from tests.unit.test_agent_session import Agent, text_item
from tests.unit.test_transcription_session import b64, make_session, send, silence, tone, types

RATE = 16_000
WINDOW = 512


def segmenter(idle_ms: int | None = 5000, **config: Any) -> TurnSegmenter:
    return TurnSegmenter(ServerVADConfig(idle_timeout_ms=idle_ms, **config), EnergyVAD())


def timeouts(ops: list[Any]) -> list[tuple[int, int]]:
    return [(op.audio_start_ms, op.audio_end_ms) for op in ops if isinstance(op, IdleTimeout)]


# -- the pure timer ------------------------------------------------------------------------


def test_no_speech_for_the_timeout_emits_the_span_and_its_audio_then_the_timer_runs_again() -> None:
    seg = segmenter(5000)
    ops = seg.push(silence(11.0, RATE))
    spans = timeouts(ops)
    assert len(spans) == 2, spans
    (first_start, first_end), (second_start, second_end) = spans
    assert first_start == 0 and 5000 <= first_end < 5000 + 32
    assert second_start == first_end and second_end - second_start >= 5000
    (first,) = [op for op in ops if isinstance(op, IdleTimeout)][:1]
    assert len(first.samples) == (first_end - first_start) * RATE // 1000, "the span's own audio"


def test_without_idle_timeout_ms_nothing_times_out() -> None:
    assert timeouts(segmenter(None).push(silence(40.0, RATE))) == []


def test_speech_stops_the_timer_and_its_end_starts_it_again() -> None:
    seg = segmenter(5000, prefix_padding_ms=0)
    audio = np.concatenate([silence(3.0, RATE), tone(1.0, RATE), silence(5.0, RATE), silence(2.0, RATE)])
    ops = seg.push(audio)
    (stopped,) = [op for op in ops if isinstance(op, SpeechStopped)]
    assert [op for op in ops if isinstance(op, SpeechStarted)]
    ((start, end),) = timeouts(ops)
    assert start == stopped.audio_end_ms, "the timer runs from the end of the turn"
    assert end - start >= 5000 and end < stopped.audio_end_ms + 5000 + 32


def test_a_held_timer_never_fires_and_an_armed_one_starts_after_its_delay() -> None:
    seg = segmenter(5000)
    seg.hold_idle()  # the agent is answering
    assert timeouts(seg.push(silence(20.0, RATE))) == []
    seg.arm_idle(2 * RATE)  # its answer plays for 2 s more
    ops = seg.push(silence(7.5, RATE))
    ((start, end),) = timeouts(ops)
    assert start == 22_000 and end - start >= 5000


def test_a_commit_or_clear_starts_the_timer_again() -> None:
    seg = segmenter(5000)
    assert timeouts(seg.push(silence(4.0, RATE))) == []
    seg.reset()  # the client's own start-over
    assert timeouts(seg.push(silence(4.0, RATE))) == [], "4 s since the reset, not 8 s since the start"
    assert len(timeouts(seg.push(silence(1.5, RATE)))) == 1


@pytest.mark.parametrize("value", [4999, 30_001, 0])
def test_the_range_is_openais(value: int) -> None:
    with pytest.raises(ValueError, match="idle_timeout_ms"):
        ServerVADConfig(idle_timeout_ms=value)


# -- the transcription session ---------------------------------------------------------------


def ga_transcription(idle: Any) -> Any:
    session = make_session(Generation.GA)
    session.events_to_send()
    update = {
        "type": "transcription",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": idle}}},
    }
    return session, send(session, "session.update", session=update)


@pytest.mark.parametrize("value", [4999, 30_001, "soon", 1e12])
def test_an_idle_timeout_out_of_range_is_refused_and_changes_nothing(value: Any) -> None:
    session, (error,) = ga_transcription(value)
    assert error["type"] == "error"
    assert error["error"]["param"] == "session.audio.input.turn_detection.idle_timeout_ms"
    assert session.config.turn_detection is None


def test_a_transcription_session_reports_the_timeout_and_commits_the_silence_as_an_item() -> None:
    session, (updated,) = ga_transcription(5000)
    validate(updated, Generation.GA)
    assert updated["session"]["audio"]["input"]["turn_detection"]["idle_timeout_ms"] == 5000
    events = send(session, "input_audio_buffer.append", audio=b64(silence(6.0, 24_000)))
    for event in events:
        validate(event, Generation.GA)
    assert types(events) == ["input_audio_buffer.timeout_triggered", "input_audio_buffer.committed"]
    triggered, committed = events
    assert triggered["audio_start_ms"] == 0 and triggered["audio_end_ms"] >= 5000
    assert triggered["item_id"] == committed["item_id"]
    job = session.next_job()
    assert job is not None and job.final and len(job.request.audio) >= 5 * RATE
    session.job_done(job, StepResult(text="", language="en"))
    (completed,) = session.events_to_send()
    assert completed["type"] == "conversation.item.input_audio_transcription.completed"
    assert completed["item_id"] == triggered["item_id"] and completed["transcript"] == ""


def test_null_turns_the_timeout_off_and_beta_never_sets_one() -> None:
    session, (updated,) = ga_transcription(None)
    assert "idle_timeout_ms" not in updated["session"]["audio"]["input"]["turn_detection"]
    assert send(session, "input_audio_buffer.append", audio=b64(silence(8.0, 24_000))) == []
    beta = make_session(Generation.BETA)
    beta.events_to_send()
    turn = {"type": "server_vad", "idle_timeout_ms": 5000}  # beta has no such field: ignored
    (event,) = send(beta, "transcription_session.update", session={"turn_detection": turn})
    validate(event, Generation.BETA)
    assert "idle_timeout_ms" not in event["session"]["turn_detection"]
    assert send(beta, "input_audio_buffer.append", audio=b64(silence(8.0, 16_000))) == []


# -- the voice agent ---------------------------------------------------------------------------


def idle_agent() -> Agent:
    agent = Agent()
    agent.events()
    turn = {"type": "server_vad", "idle_timeout_ms": 5000}
    agent.send("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turn}}})
    return agent


def test_the_agent_answers_a_timeout_even_when_nothing_was_heard() -> None:
    agent = idle_agent()
    agent.send("conversation.item.create", item=text_item("Tell me about Rome."))
    events = agent.send("input_audio_buffer.append", audio=b64(silence(6.0, 24_000)))
    assert types(events)[:3] == [
        "input_audio_buffer.timeout_triggered",
        "input_audio_buffer.committed",
        "conversation.item.added",
    ]
    agent.transcribe("")  # the model heard nothing in it
    # "a model response will be generated": the model continues from the context it has.
    llm: LLMJob = agent.job(LLM)
    assert llm.request.messages[-1].content == "Tell me about Rome."


def test_the_agent_holds_the_timer_while_it_answers_and_runs_it_after_its_audio() -> None:
    agent = idle_agent()
    agent.send("conversation.item.create", item=text_item("Hello?"))
    agent.send("response.create")
    llm: LLMJob = agent.job(LLM)
    # A long answer in the making: 20 s of silence from the user is not idle.
    assert "input_audio_buffer.timeout_triggered" not in types(
        agent.send("input_audio_buffer.append", audio=b64(silence(20.0, 24_000)))
    )
    agent.say(llm, "Hello there.")
    _, done = agent.speak(seconds=3.0)
    assert types(done)[-1] == "response.done"
    assert agent.session.next_job(TTS) is None
    # The timer starts once the 3 s of answer have played: 7.9 s later it has not fired yet...
    quiet = agent.send("input_audio_buffer.append", audio=b64(silence(7.9, 24_000)))
    assert "input_audio_buffer.timeout_triggered" not in types(quiet)
    # ...and at 8 s and a bit (3 s of playback + 5 s of timeout) it has.
    late = agent.send("input_audio_buffer.append", audio=b64(silence(0.3, 24_000)))
    assert types(late)[0] == "input_audio_buffer.timeout_triggered"
