"""Coalescing under load: a partial step still waiting for the engine when the next chunk
comes is skipped, and the next step decodes both."""

from __future__ import annotations

from prometheus_client import REGISTRY

from dragoman.engines.asr.base import StepResult
from dragoman.engines.workers import JobCancelled
from dragoman.errors import EngineFailure
from tests.unit.test_transcription_session import b64, make_session, send, tone, types

RATE = 16_000


def coalesced_total() -> float:
    return REGISTRY.get_sample_value("dragoman_transcription_steps_coalesced_total") or 0.0


def test_a_step_that_waited_a_whole_chunk_is_skipped() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    first = session.next_job()
    assert first is not None and len(first.request.audio) == 2 * RATE
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    assert not first.cancel.cancelled  # half a chunk more: the step is still worth its partial
    before = coalesced_total()
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    assert first.cancel.cancelled
    # The worker drops a cancelled request whose call has not started.
    session.job_failed(first, JobCancelled("cancelled before it ran"))
    assert session.events_to_send() == []  # no error: the client sees only a later partial
    assert session.coalesced == 1 and coalesced_total() == before + 1
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
