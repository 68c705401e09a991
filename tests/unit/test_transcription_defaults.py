"""A new transcription session's defaults are OpenAI's: `server_vad`, with OpenAI's values.

OpenAI's transcription guide: VAD is "Enabled by default"; its example session shows
`{"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 500}`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, PrefixMode
from dragoman.protocol.realtime.client_parsers import ClientParser, Generation, default_input_rate
from dragoman.protocol.realtime.server_events import wire_event
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.transcription.session import TranscriptionSession, default_config
from dragoman.streaming.turns import ServerVADConfig
from tests.unit.fakes import EnergyVAD, WordTokenizer
from tests.unit.realtime_sdk import validate
from tests.unit.test_transcription_session import b64, silence, tone

OPENAI_DEFAULT = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
}

PROFILE = EngineProfile(
    name="fake-asr",
    capabilities=ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT),
    tokenizer=WordTokenizer(),
    max_item_seconds=300.0,
)


def new_session(generation: Generation, vad: bool = True) -> tuple[TranscriptionSession, ClientParser]:
    config = default_config(TranscriptionSettings(), default_input_rate(generation), vad=vad)
    return TranscriptionSession("sess_test", PROFILE, config, EnergyVAD if vad else None), ClientParser(
        generation
    )


def wire(session: TranscriptionSession, parser: ClientParser) -> list[dict[str, Any]]:
    return [wire_event(e, parser.generation) for e in session.events_to_send()]


def test_the_default_is_openais_server_vad() -> None:
    config = default_config(TranscriptionSettings(), 24_000, vad=True)
    assert config.turn_detection == ServerVADConfig(
        threshold=0.5, prefix_padding_ms=300, silence_duration_ms=500
    )
    # The rest is the server's settings; without a VAD model, turn_detection alone differs.
    assert dataclasses.replace(config, turn_detection=None) == SessionConfig.defaults(
        TranscriptionSettings(), 24_000
    )
    assert default_config(TranscriptionSettings(), 24_000, vad=False).turn_detection is None


@pytest.mark.parametrize("generation", [Generation.GA, Generation.BETA])
def test_session_created_shows_it_as_openai_does(generation: Generation) -> None:
    session, parser = new_session(generation)
    (created,) = wire(session, parser)
    body = created["session"]
    turns = (
        body["audio"]["input"]["turn_detection"] if generation is Generation.GA else body["turn_detection"]
    )
    assert turns == OPENAI_DEFAULT
    validate(created, generation)


def test_without_a_vad_model_the_session_starts_at_null_and_says_so() -> None:
    session, parser = new_session(Generation.GA, vad=False)
    (created,) = wire(session, parser)
    assert created["session"]["audio"]["input"]["turn_detection"] is None
    assert session.config.turn_detection is None


def test_a_default_session_ends_a_turn_by_itself_and_null_turns_it_off() -> None:
    session, parser = new_session(Generation.BETA)
    wire(session, parser)
    # Speech, then more than 500 ms of silence: the server commits the turn, no client commit.
    audio = np.concatenate([silence(0.5), tone(1.0), silence(1.0)])
    session.receive(parser.parse(f'{{"type": "input_audio_buffer.append", "audio": "{b64(audio)}"}}'))
    kinds = [e["type"] for e in wire(session, parser)]
    assert kinds[:3] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
    ], kinds
    # A push-to-talk client sends null; the same audio then waits for its commit.
    session.receive(
        parser.parse('{"type": "transcription_session.update", "session": {"turn_detection": null}}')
    )
    (updated,) = wire(session, parser)
    assert updated["session"]["turn_detection"] is None
    session.receive(parser.parse(f'{{"type": "input_audio_buffer.append", "audio": "{b64(audio)}"}}'))
    assert not [e for e in wire(session, parser) if e["type"].startswith("input_audio_buffer.")]
    session.receive(parser.parse('{"type": "input_audio_buffer.commit"}'))
    assert "input_audio_buffer.committed" in [e["type"] for e in wire(session, parser)]
