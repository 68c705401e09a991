"""The interpreter's WebRTC call codec (`transports/webrtc/translation.py`) and the admission
both transports share (`transports/interpreter_service.admission`): no sockets, no models."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import openai.types.realtime as ga_types
from pydantic import TypeAdapter

from dragoman.sessions.agent import events as agent
from dragoman.sessions.translation import events as translation
from dragoman.transports.interpreter_service import InterpreterService, admission
from dragoman.transports.webrtc.channel import TrackAudio
from dragoman.transports.webrtc.playout import TRACK_RATE, Playout
from dragoman.transports.webrtc.translation import SPEECH, TranslationCallCodec
from tests.unit.test_webrtc import Heard, play, tone

SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(ga_types.RealtimeTranslationServerEvent)


def codec() -> tuple[TranslationCallCodec, Playout, Heard]:
    heard = Heard()
    playout = Playout(heard)
    return TranslationCallCodec(playout), playout, heard


def test_track_audio_is_the_sessions_input() -> None:
    call, _, _ = codec()
    pcm = tone(0.2)
    event = call.parse(TrackAudio(pcm))
    assert isinstance(event, translation.AppendAudio)
    assert base64.b64decode(event.audio) == pcm


def test_an_append_on_the_data_channel_is_refused_for_the_transport() -> None:
    call, _, _ = codec()
    frame = json.dumps({"type": "session.input_audio_buffer.append", "audio": "AAAA", "event_id": "e1"})
    event = call.parse(frame)
    assert isinstance(event, translation.Rejected)
    assert event.error.code == "invalid_event_for_transport" and event.event_id == "e1"
    wire = json.loads(cast(str, call.write(translation.Error(event.error, event.event_id))))
    SERVER_EVENT.validate_python(wire)
    assert wire["error"]["event_id"] == "e1"


def test_the_other_events_are_the_websockets() -> None:
    call, _, _ = codec()
    update = call.parse(
        json.dumps({"type": "session.update", "session": {"audio": {"output": {"language": "it"}}}})
    )
    assert isinstance(update, translation.UpdateSession) and update.values["language"] == "it"
    assert isinstance(call.parse(json.dumps({"type": "session.close"})), translation.CloseSession)
    frame = call.write(translation.OutputTranscriptDelta("Hallo", 400))
    assert frame is not None
    wire = json.loads(frame)
    SERVER_EVENT.validate_python(wire)
    assert wire == {**wire, "type": "session.output_transcript.delta", "delta": "Hallo", "elapsed_ms": 400}


def test_the_speech_goes_to_the_track_not_the_data_channel() -> None:
    call, playout, _ = codec()
    assert call.write(translation.OutputAudioDelta(tone(0.2), 24_000, 0)) is None
    assert call.write(translation.OutputAudioDelta(tone(0.2), 24_000, 200)) is None
    # The resampler holds a little back until the session closes, then gives its tail.
    assert 0.35 < playout.queued_seconds <= 0.4
    closed = call.write(translation.SessionClosed())
    assert closed is not None and json.loads(closed)["type"] == "session.closed"
    assert abs(playout.queued_seconds - 0.4) < 0.005
    audio = play(playout, 0.5)
    loud = np.flatnonzero(np.abs(audio) > 1000)
    assert abs((loud[-1] - loud[0]) / TRACK_RATE - 0.4) < 0.01, "both frames, back to back"
    assert playout.queued_seconds == 0


def test_speech_between_clauses_leaves_silence_on_the_track() -> None:
    call, playout, _ = codec()
    call.write(translation.OutputAudioDelta(tone(0.2), 24_000, 0))
    first = play(playout, 0.3)
    assert np.abs(first).max() > 10_000 and not first[-TRACK_RATE // 20 :].any(), "silence after the clause"
    call.write(translation.OutputAudioDelta(tone(0.2), 24_000, 2000))
    assert np.abs(play(playout, 0.1)).max() > 10_000, "the next clause plays when it comes"


def test_the_playouts_own_events_have_no_translation_counterpart() -> None:
    call, playout, heard = codec()
    call.write(translation.OutputAudioDelta(tone(0.2), 24_000, 0))
    playout.next_frame()
    assert heard.events == [agent.OutputAudioStarted(SPEECH)]
    assert call.write(heard.events[0]) is None


# -- admission ----------------------------------------------------------------------------


def service(targets: tuple[str, ...] = ("de", "it"), sessions: int = 0, limit: int = 2) -> InterpreterService:
    languages = SimpleNamespace(targets=targets)
    settings = SimpleNamespace(max_sessions=limit)
    return cast(
        InterpreterService, SimpleNamespace(languages=languages, settings=settings, sessions=sessions)
    )


def test_admission_takes_a_known_model_below_the_limit() -> None:
    assert admission(service(), "gpt-realtime-translate") is None
    assert admission(service(), "dragoman-interpreter") is None


def test_admission_refuses_with_the_reason() -> None:
    cases = [
        (None, "gpt-realtime-translate", "service_unavailable", False),
        (service(targets=()), "gpt-realtime-translate", "service_unavailable", False),
        (service(), None, "missing_model", False),
        (service(), "gpt-4o-realtime-preview", "model_not_found", False),
        (service(sessions=2), "gpt-realtime-translate", "session_limit_reached", True),
    ]
    for host, model, code, later in cases:
        refusal = admission(host, model)
        assert refusal is not None and (refusal.code, refusal.later) == (code, later), (model, refusal)
