"""Server events of OpenAI's Realtime translation session, as pydantic models.

The shapes are `openai.types.realtime.RealtimeTranslationServerEvent` (SDK 3.60), which the
tests validate every event against: `session.created` (first, with the session: `id`
`sess_…`, `model`, `type: "translation"`, `audio`, `expires_at`), `session.updated`,
`session.input_transcript.delta`, `session.output_transcript.delta`,
`session.output_audio.delta` (`delta`, `sample_rate`, `channels`, `format: "pcm16"`), each
delta with `elapsed_ms`, `session.closed` and `error`.

`translation_wire` writes the session's output events (`sessions/translation/events.py`);
event ids are assigned here.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel

from dragoman.protocol.realtime.server_events import ErrorEvent, ServerEvent, error_detail
from dragoman.sessions.translation import events as out
from dragoman.sessions.translation.config import TranslationConfig


class NoiseReductionObject(BaseModel):
    type: Literal["near_field", "far_field"]
    strength: float


class TranscriptionObject(BaseModel):
    model: str


class AudioInputObject(BaseModel):
    transcription: TranscriptionObject | None
    noise_reduction: NoiseReductionObject | None


class AudioOutputObject(BaseModel):
    language: str


class AudioObject(BaseModel):
    input: AudioInputObject
    output: AudioOutputObject


class TranslationSessionObject(BaseModel):
    id: str
    type: Literal["translation"] = "translation"
    model: str
    audio: AudioObject
    expires_at: int


class SessionCreated(ServerEvent):
    type: Literal["session.created"] = "session.created"
    session: TranslationSessionObject


class SessionUpdated(ServerEvent):
    type: Literal["session.updated"] = "session.updated"
    session: TranslationSessionObject


class InputTranscriptDelta(ServerEvent):
    type: Literal["session.input_transcript.delta"] = "session.input_transcript.delta"
    delta: str
    elapsed_ms: int


class OutputTranscriptDelta(ServerEvent):
    type: Literal["session.output_transcript.delta"] = "session.output_transcript.delta"
    delta: str
    elapsed_ms: int


class OutputAudioDelta(ServerEvent):
    type: Literal["session.output_audio.delta"] = "session.output_audio.delta"
    delta: str
    sample_rate: int
    channels: int = 1
    format: Literal["pcm16"] = "pcm16"
    elapsed_ms: int


class SessionClosed(ServerEvent):
    type: Literal["session.closed"] = "session.closed"


def session_object(
    session_id: str, model: str, config: TranslationConfig, expires_at: int, transcription_engine: str
) -> TranslationSessionObject:
    """The session as OpenAI's `RealtimeTranslationSession` shows it. The transcription model is
    the engine that transcribes the source, whatever model the client named."""
    transcription = TranscriptionObject(model=transcription_engine) if config.transcription else None
    noise = config.noise_reduction
    return TranslationSessionObject(
        id=session_id,
        model=model,
        expires_at=expires_at,
        audio=AudioObject(
            input=AudioInputObject(
                transcription=transcription,
                noise_reduction=NoiseReductionObject(type=noise.type, strength=noise.strength)
                if noise
                else None,
            ),
            output=AudioOutputObject(language=config.language),
        ),
    )


def translation_event(event: out.ServerEvent) -> ServerEvent:
    """The wire model of a translation session's output event."""
    if isinstance(event, out.OutputAudioDelta):
        delta = base64.b64encode(event.pcm).decode("ascii")
        return OutputAudioDelta(delta=delta, sample_rate=event.sample_rate, elapsed_ms=event.elapsed_ms)
    if isinstance(event, out.OutputTranscriptDelta):
        return OutputTranscriptDelta(delta=event.delta, elapsed_ms=event.elapsed_ms)
    if isinstance(event, out.InputTranscriptDelta):
        return InputTranscriptDelta(delta=event.delta, elapsed_ms=event.elapsed_ms)
    if isinstance(event, out.SessionConfigured):
        body = session_object(
            event.session_id, event.model, event.config, event.expires_at, event.transcription_engine
        )
        return SessionCreated(session=body) if event.created else SessionUpdated(session=body)
    if isinstance(event, out.SessionClosed):
        return SessionClosed()
    return ErrorEvent(error=error_detail(event.error, event.event_id))


def translation_wire(event: out.ServerEvent) -> dict[str, Any]:
    """`translation_event` as the JSON object sent."""
    return translation_event(event).wire()
