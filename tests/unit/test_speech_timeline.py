"""The speech front's one input clock: turn events stay on the client's timeline through
clears, commits, rate changes and VAD switched on late; and a VAD change waits for the
open turn to end."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from dragoman.protocol.realtime.client_parsers import Generation
from dragoman.sessions.speech.audio_input import AudioInput
from dragoman.streaming.turns import ServerVADConfig, SpeechStarted, TurnSegmenter
from tests.unit.fakes import EnergyVAD
from tests.unit.test_transcription_session import WireSession, b64, make_session, send, silence, tone, types

#: One VAD window of EnergyVAD (512 samples at 16 kHz).
WINDOW_MS = 32
NO_PADDING = {"type": "server_vad", "prefix_padding_ms": 0, "silence_duration_ms": 500}


def ga_session(rate: int, turn_detection: dict[str, Any] | None) -> WireSession:
    session = make_session(Generation.GA)
    session.events_to_send()
    audio_input: dict[str, Any] = {"format": {"type": "audio/pcm", "rate": rate}}
    audio_input["turn_detection"] = turn_detection
    events = send(
        session, "session.update", session={"type": "transcription", "audio": {"input": audio_input}}
    )
    assert types(events) == ["session.updated"]
    return session


def turn_events(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [
        (e["type"].rsplit(".", 1)[1], cast(int, e.get("audio_start_ms", e.get("audio_end_ms"))))
        for e in events
        if e["type"].endswith(("speech_started", "speech_stopped"))
    ]


def speech_at_5s(session: WireSession, rate: int, heard_seconds: float) -> list[tuple[str, int]]:
    """Silence up to 5 s on the timeline (`heard_seconds` of it already sent), then speech."""
    audio = np.concatenate([silence(5.0 - heard_seconds, rate), tone(1.0, rate), silence(1.0, rate)])
    return turn_events(send(session, "input_audio_buffer.append", audio=b64(audio)))


@pytest.mark.parametrize("rate", [24_000, 48_000])
def test_fifty_clears_keep_the_timeline(rate: int) -> None:
    # 0.0999 s pieces: an odd number of input samples, and the resampler's lookahead held at each clear.
    session = ga_session(rate, NO_PADDING)
    piece = 0.0999
    for _ in range(50):
        send(session, "input_audio_buffer.append", audio=b64(silence(piece, rate)))
        assert types(send(session, "input_audio_buffer.clear")) == ["input_audio_buffer.cleared"]
    heard = int(piece * rate) * 50 / rate
    (started, stopped) = speech_at_5s(session, rate, heard)
    assert started[0] == "speech_started" and stopped[0] == "speech_stopped"
    # It was 4587 ms: every clear lost what the resampler held.
    assert abs(started[1] - 5000) <= WINDOW_MS


@pytest.mark.parametrize("rate", [24_000, 48_000])
def test_commits_keep_the_timeline(rate: int) -> None:
    session = ga_session(rate, NO_PADDING)
    for _ in range(4):
        # Speech short of min_speech_ms, committed by the client: each commit drains the resampler.
        audio = np.concatenate([silence(0.7, rate), tone(0.2, rate)])
        send(session, "input_audio_buffer.append", audio=b64(audio))
        events = send(session, "input_audio_buffer.commit")
        assert types(events) == ["input_audio_buffer.speech_started", "input_audio_buffer.committed"]
    (started, _) = speech_at_5s(session, rate, 3.6)
    assert abs(started[1] - 5000) <= WINDOW_MS


def test_vad_switched_on_after_5s_starts_at_the_input_clock() -> None:
    session = ga_session(24_000, None)
    send(session, "input_audio_buffer.append", audio=b64(silence(3.0, 24_000)))
    send(session, "input_audio_buffer.commit")
    send(session, "input_audio_buffer.append", audio=b64(silence(2.0, 24_000)))
    send(session, "input_audio_buffer.clear")
    update = {"type": "transcription", "audio": {"input": {"turn_detection": NO_PADDING}}}
    assert types(send(session, "session.update", session=update)) == ["session.updated"]
    # It was 0: the first segmenter started its timeline when VAD came on.
    (started, _) = speech_at_5s(session, 24_000, 5.0)
    assert abs(started[1] - 5000) <= WINDOW_MS


def test_a_rate_change_keeps_the_timeline() -> None:
    session = ga_session(24_000, NO_PADDING)
    send(session, "input_audio_buffer.append", audio=b64(silence(2.0, 24_000)))
    update = {"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 48_000}}}}
    assert types(send(session, "session.update", session=update)) == ["session.updated"]
    (started, _) = speech_at_5s(session, 48_000, 2.0)
    assert abs(started[1] - 5000) <= WINDOW_MS


def test_the_input_clock_counts_every_rate() -> None:
    audio_input = AudioInput(24_000)
    audio_input.accept(*audio_input.decode(b64(silence(1.0, 24_000))))
    audio_input.reset()
    audio_input.set_rate(48_000)
    audio_input.accept(*audio_input.decode(b64(silence(0.5, 48_000))))
    assert audio_input.clock == 24_000


def test_realign_moves_a_reset_segmenter_only() -> None:
    segmenter = TurnSegmenter(ServerVADConfig(prefix_padding_ms=0), EnergyVAD())
    segmenter.push(silence(0.1))
    with pytest.raises(ValueError):
        segmenter.realign(16_000)  # a leftover short of a window is still held
    segmenter.reset()
    segmenter.realign(16_000)
    assert segmenter.position == 16_000
    ops = segmenter.push(np.concatenate([tone(0.5), silence(0.1)]))
    assert ops[0] == SpeechStarted(1000)


# -- a VAD change during a turn ------------------------------------------------------------


def test_a_vad_change_mid_turn_applies_at_the_next_turn() -> None:
    session = ga_session(16_000, NO_PADDING)
    events = send(session, "input_audio_buffer.append", audio=b64(np.concatenate([silence(1.0), tone(1.0)])))
    assert [kind for kind, _ in turn_events(events)] == ["speech_started"]
    slower = {"type": "server_vad", "prefix_padding_ms": 0, "silence_duration_ms": 1500}
    update = {"type": "transcription", "audio": {"input": {"turn_detection": slower}}}
    events = send(session, "session.update", session=update)
    # The update is taken (and reported) at once...
    assert types(events) == ["session.updated"]
    assert events[0]["session"]["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 1500
    # ... but the open turn keeps its settings: no second speech_started, and it ends after 500 ms.
    events = send(session, "input_audio_buffer.append", audio=b64(tone(0.5)))
    assert turn_events(events) == []
    events = send(session, "input_audio_buffer.append", audio=b64(silence(0.8)))
    ((kind, end),) = turn_events(events)
    assert kind == "speech_stopped" and abs(end - 3000) <= 2 * WINDOW_MS
    # The next turn waits 1500 ms of silence.
    events = send(session, "input_audio_buffer.append", audio=b64(np.concatenate([tone(1.0), silence(1.0)])))
    assert [kind for kind, _ in turn_events(events)] == ["speech_started"]
    events = send(session, "input_audio_buffer.append", audio=b64(silence(0.6)))
    ((kind, end),) = turn_events(events)
    assert kind == "speech_stopped" and abs(end - (3300 + 1000 + 1500)) <= 2 * WINDOW_MS


def test_a_vad_change_during_a_candidate_keeps_its_audio() -> None:
    session = ga_session(16_000, NO_PADDING)
    # 0.2 s of speech: a candidate short of min_speech_ms.
    send(session, "input_audio_buffer.append", audio=b64(np.concatenate([silence(0.5), tone(0.2)])))
    update = {
        "type": "transcription",
        "audio": {"input": {"turn_detection": {**NO_PADDING, "threshold": 0.4}}},
    }
    assert types(send(session, "session.update", session=update)) == ["session.updated"]
    events = send(session, "input_audio_buffer.append", audio=b64(np.concatenate([tone(0.5), silence(1.0)])))
    ((_, start), (_, _)) = turn_events(events)
    assert abs(start - 500) <= WINDOW_MS, "the candidate's speech is the turn's start"
    segmenter = session.session.front._segmenter
    assert segmenter is not None
    assert segmenter.config.threshold == 0.4


# -- bounds -------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["prefix_padding_ms", "silence_duration_ms"])
@pytest.mark.parametrize("value", ["1e12", 10_001, 1e12])
def test_vad_durations_are_bounded(field: str, value: Any) -> None:
    session = ga_session(16_000, None)
    update: dict[str, Any] = {
        "type": "transcription",
        "audio": {"input": {"turn_detection": {"type": "server_vad", field: value}}},
    }
    (error,) = send(session, "session.update", session=update)
    assert error["type"] == "error"
    assert error["error"]["param"] == f"session.audio.input.turn_detection.{field}"
    assert session.config.turn_detection is None
    update["audio"]["input"]["turn_detection"][field] = 10_000
    assert types(send(session, "session.update", session=update)) == ["session.updated"]
