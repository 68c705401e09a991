"""Noise reduction in Realtime transcription and agent sessions, with no sockets and no models.

OpenAI's `audio.input.noise_reduction` (beta: `input_audio_noise_reduction`) "filters audio
added to the input audio buffer before it is sent to VAD and the model"; a session update
may set it, change its strength ("Omitting strength from a session update preserves the
current strength"), or turn it off with null. The speech front applies it for every session
that has one (the interpreter's own tests are in test_translation_session.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.speech.config import NoiseReduction
from tests.unit.realtime_sdk import validate
from tests.unit.test_agent_session import Agent
from tests.unit.test_transcription_session import b64, make_session, send, silence, tone, types

GA, BETA = Generation.GA, Generation.BETA


def hum(seconds: float, rate: int, seed: int = 3) -> np.ndarray:
    """Steady noise loud enough (RMS 0.08) for the energy VAD to take it for speech."""
    return (0.08 * np.random.default_rng(seed).standard_normal(int(seconds * rate))).astype(np.float32)


def ga_input(noise: dict[str, Any] | None) -> dict[str, Any]:
    return {"type": "transcription", "audio": {"input": {"noise_reduction": noise}}}


def test_ga_transcription_update_sets_changes_and_clears_it() -> None:
    session = make_session(GA)
    (created,) = session.events_to_send()
    assert created["session"]["audio"]["input"]["noise_reduction"] is None
    (updated,) = send(session, "session.update", session=ga_input({"type": "far_field", "strength": 0.5}))
    validate(updated, GA)
    assert updated["session"]["audio"]["input"]["noise_reduction"] == {"type": "far_field", "strength": 0.5}
    assert session.front.config.noise_reduction == NoiseReduction("far_field", 0.5)
    (kept,) = send(session, "session.update", session=ga_input({"type": "near_field"}))
    assert kept["session"]["audio"]["input"]["noise_reduction"] == {"type": "near_field", "strength": 0.5}
    (off,) = send(session, "session.update", session=ga_input(None))
    assert off["session"]["audio"]["input"]["noise_reduction"] is None
    assert session.front.config.noise_reduction is None


def test_beta_transcription_update_takes_input_audio_noise_reduction() -> None:
    session = make_session(BETA)
    session.events_to_send()
    (updated,) = send(
        session,
        "transcription_session.update",
        session={"input_audio_noise_reduction": {"type": "near_field"}},
    )
    validate(updated, BETA)  # beta's transcription session object has no field for it
    assert session.front.config.noise_reduction == NoiseReduction("near_field", 1.0)


@pytest.mark.parametrize(
    "noise",
    [{"type": "studio"}, {"type": "near_field", "strength": 3}, {"strength": 0.5}, "near_field"],
)
def test_a_bad_setting_is_an_error_and_changes_nothing(noise: Any) -> None:
    session = make_session(GA)
    session.events_to_send()
    send(session, "session.update", session=ga_input({"type": "far_field"}))
    (error,) = send(session, "session.update", session=ga_input(noise))
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert session.front.config.noise_reduction == NoiseReduction("far_field", 1.0)


def test_transcription_noise_reduction_filters_before_the_vad() -> None:
    """Steady noise the VAD takes for speech is cut below it once noise reduction is on; a tone
    over the noise still opens a turn; turned off, the noise opens turns again."""
    rate = 24_000

    def turns_in(session: Any, audio: np.ndarray) -> int:
        started = 0
        for start in range(0, len(audio), rate // 5):
            events = send(session, "input_audio_buffer.append", audio=b64(audio[start : start + rate // 5]))
            started += types(events).count("input_audio_buffer.speech_started")
        return started

    vad = {"type": "transcription", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
    plain = make_session(GA)
    send(plain, "session.update", session=vad)
    assert turns_in(plain, hum(3.0, rate)) == 1, "without noise reduction, the noise is a turn"

    session = make_session(GA)
    send(session, "session.update", session=vad)
    send(session, "session.update", session=ga_input({"type": "near_field"}))
    assert turns_in(session, hum(3.0, rate)) == 0, "the noise is cut"
    over = tone(1.5, rate) + hum(1.5, rate, seed=4)
    assert turns_in(session, np.concatenate([over, silence(1.0, rate)])) == 1, "a tone over it is heard"
    send(session, "session.update", session=ga_input(None))
    assert turns_in(session, hum(3.0, rate, seed=6)) == 1, "with noise reduction off, the noise is heard"


def test_a_new_input_rate_keeps_the_setting() -> None:
    session = make_session(GA, vad=False)
    session.events_to_send()
    send(session, "session.update", session=ga_input({"type": "near_field", "strength": 0.3}))
    beta_rate = {
        "type": "transcription",
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}},
    }
    send(session, "session.update", session=beta_rate)
    assert session.front.config.noise_reduction == NoiseReduction("near_field", 0.3)
    quiet = send(session, "input_audio_buffer.append", audio=b64(hum(0.5, 16_000)))
    assert types(quiet) == [], "appends at the new rate are taken"


@pytest.mark.parametrize("generation", [GA, BETA])
def test_agent_update_sets_it_and_shows_it(generation: Generation) -> None:
    agent = Agent(generation=generation)
    agent.events()
    if generation is GA:
        session: dict[str, Any] = {
            "type": "realtime",
            "audio": {"input": {"noise_reduction": {"type": "far_field", "strength": 0.7}}},
        }
    else:
        session = {"input_audio_noise_reduction": {"type": "far_field"}}
    (updated,) = agent.send("session.update", session=session)  # validated against the SDK
    if generation is GA:
        shown = updated["session"]["audio"]["input"]["noise_reduction"]
        assert shown == {"type": "far_field", "strength": 0.7}
    else:
        assert updated["session"]["input_audio_noise_reduction"] == {"type": "far_field"}
    assert agent.session.front.config.noise_reduction is not None
    assert agent.session.front.config.noise_reduction.type == "far_field"
    off = (
        {"type": "realtime", "audio": {"input": {"noise_reduction": None}}}
        if generation is GA
        else {"input_audio_noise_reduction": None}
    )
    agent.send("session.update", session=off)
    assert agent.session.front.config.noise_reduction is None


def test_agent_noise_reduction_filters_before_the_vad() -> None:
    rate = 24_000
    agent = Agent()
    agent.events()
    agent.send(
        "session.update",
        session={"type": "realtime", "audio": {"input": {"noise_reduction": {"type": "near_field"}}}},
    )
    noise = hum(3.0, rate)
    for start in range(0, len(noise), rate // 5):
        agent.send("input_audio_buffer.append", audio=b64(noise[start : start + rate // 5]))
    assert "input_audio_buffer.speech_started" not in types(agent.log), "the noise is cut"
    speech = np.concatenate([tone(1.0, rate) + hum(1.0, rate, seed=5), silence(0.2, rate)])
    for start in range(0, len(speech), rate // 5):
        agent.send("input_audio_buffer.append", audio=b64(speech[start : start + rate // 5]))
    assert "input_audio_buffer.speech_started" in types(agent.log), "speech over it is heard"
