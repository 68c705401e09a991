"""Coalescing under load: a partial step still waiting for the engine when the next chunk
comes is skipped, and the next step decodes both."""

from __future__ import annotations

from dragoman.engines.asr.base import StepResult
from dragoman.engines.workers import JobCancelled, Priority
from dragoman.errors import EngineFailure
from dragoman.sessions.base import Observation
from dragoman.sessions.speech.decoder import STEPS_COALESCED
from tests.unit.test_transcription_session import b64, make_session, send, tone, types

RATE = 16_000


def test_a_step_that_waited_a_whole_chunk_is_skipped() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    first = session.next_job()
    assert first is not None and len(first.request.audio) == 2 * RATE
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    assert not first.cancel.cancelled  # half a chunk more: the step is still worth its partial
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    assert first.cancel.cancelled
    # The worker drops a cancelled request whose call has not started.
    session.job_failed(first, JobCancelled("cancelled before it ran"))
    assert session.events_to_send() == []  # no error: the client sees only a later partial
    # Observed for /metrics, which the driver records.
    assert session.coalesced == 1 and session.take_observations() == [Observation(STEPS_COALESCED)]
    second = session.next_job()
    assert second is not None and len(second.request.audio) == 4 * RATE
    session.job_done(second, StepResult(" one two three", "en"))
    events = session.events_to_send()
    assert types(events) == ["mstar.transcription.partial"]
    assert events[0]["audio_seconds"] == 4.0


def test_a_skipped_step_that_had_started_is_used() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    first = session.next_job()
    assert first is not None
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    assert first.cancel.cancelled
    # Its call had started: the result comes as usual, and the pending chunk is due next.
    session.job_done(first, StepResult(" one two", "en"))
    assert types(session.events_to_send()) == ["mstar.transcription.partial"]
    assert session.coalesced == 0
    second = session.next_job()
    assert second is not None and len(second.request.audio) == 4 * RATE


def test_final_steps_and_real_failures_are_not_coalesced() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    first = session.next_job()
    assert first is not None
    session.job_failed(first, EngineFailure("boom"))
    assert types(session.events_to_send()) == ["error"]
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    send(session, "input_audio_buffer.commit")
    final = session.next_job()
    assert final is not None and final.final
    send(session, "input_audio_buffer.append", audio=b64(tone(4.0)))
    assert not final.cancel.cancelled  # the committed item's last step always runs
    assert session.coalesced == 0


def test_a_commit_cancels_its_items_waiting_partial_and_the_final_takes_its_audio() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    partial = session.next_job()
    assert partial is not None and not partial.final
    send(session, "input_audio_buffer.append", audio=b64(tone(0.5)))
    assert not partial.cancel.cancelled
    assert types(send(session, "input_audio_buffer.commit")) == ["input_audio_buffer.committed"]
    # The final decodes all of the item's audio: the partial would be superseded.
    assert partial.cancel.cancelled
    session.job_failed(partial, JobCancelled("cancelled before it ran"))
    assert session.events_to_send() == []  # no error: the client waits for the final only
    final = session.next_job()
    assert final is not None and final.final and len(final.request.audio) == int(2.5 * RATE)
    session.job_done(final, StepResult(" one two three", "en"))
    events = session.events_to_send()
    assert types(events)[-1] == "conversation.item.input_audio_transcription.completed"
    assert events[-1]["transcript"] == "one two three"


def test_a_commit_leaves_a_running_partial_alone_when_it_had_started() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    partial = session.next_job()
    assert partial is not None
    send(session, "input_audio_buffer.append", audio=b64(tone(0.5)))
    send(session, "input_audio_buffer.commit")
    assert partial.cancel.cancelled
    # Its call had started: its result is used as before, and the final follows for the
    # half second it did not hear.
    session.job_done(partial, StepResult(" one two", "en"))
    assert types(session.events_to_send()) == ["mstar.transcription.partial"]
    assert session.coalesced == 0
    final = session.next_job()
    assert final is not None and final.final and len(final.request.audio) == int(2.5 * RATE)


def test_a_final_step_is_work_a_person_waits_on() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    partial = session.next_job()
    assert partial is not None and partial.priority is Priority.STREAMING
    session.job_done(partial, StepResult(" one two", "en"))
    send(session, "input_audio_buffer.append", audio=b64(tone(0.5)))
    send(session, "input_audio_buffer.commit")
    final = session.next_job()
    assert final is not None and final.final and final.priority is Priority.INTERACTIVE
