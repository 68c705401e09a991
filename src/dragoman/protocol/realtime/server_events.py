"""Server events of the Realtime transcription session, as pydantic models.

Field names and shapes follow OpenAI's wire format: `openai.types.realtime` (GA) and
`openai.types.beta.realtime` (beta), which the tests validate every event against.
`mstar.transcription.partial` is this server's extension event. The agent session
sends these too (`session.*`, `error`, `input_audio_buffer.*`,
`conversation.item.input_audio_transcription.*`), and its own
(`protocol.realtime.agent_events`).

`server_event` writes the session's output events
(`dragoman.sessions.transcription.events`) as these models, in the client's
generation; event ids are assigned here, item ids come from the session.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dragoman.errors import DragomanError, ServerError
from dragoman.protocol.realtime.generation import Generation, format_for
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.config import NoiseReduction
from dragoman.sessions.transcription import events as out
from dragoman.streaming.turns import SemanticVADConfig, TurnConfig


def new_event_id() -> str:
    return "event_" + uuid.uuid4().hex[:20]


class ServerEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str
    event_id: str = Field(default_factory=new_event_id)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ErrorDetail(BaseModel):
    type: Literal["invalid_request_error", "server_error"]
    code: str | None = None
    message: str
    param: str | None = None
    #: The client event at fault, when there is one.
    event_id: str | None = None


class ErrorEvent(ServerEvent):
    type: Literal["error"] = "error"
    error: ErrorDetail


SessionEventType = Literal[
    "session.created",
    "session.updated",
    "transcription_session.created",
    "transcription_session.updated",
]


class SessionEvent(ServerEvent):
    """`session.created` / `.updated` (GA) or `transcription_session.created` / `.updated` (beta)."""

    type: SessionEventType
    session: dict[str, Any]


class InputAudioBufferCommitted(ServerEvent):
    type: Literal["input_audio_buffer.committed"] = "input_audio_buffer.committed"
    item_id: str
    previous_item_id: str | None = None


class InputAudioBufferCleared(ServerEvent):
    type: Literal["input_audio_buffer.cleared"] = "input_audio_buffer.cleared"


class SpeechStarted(ServerEvent):
    type: Literal["input_audio_buffer.speech_started"] = "input_audio_buffer.speech_started"
    audio_start_ms: int
    item_id: str


class SpeechStopped(ServerEvent):
    type: Literal["input_audio_buffer.speech_stopped"] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int
    item_id: str


class TimeoutTriggered(ServerEvent):
    type: Literal["input_audio_buffer.timeout_triggered"] = "input_audio_buffer.timeout_triggered"
    audio_start_ms: int
    audio_end_ms: int
    item_id: str


class TranscriptionDelta(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.delta"] = (
        "conversation.item.input_audio_transcription.delta"
    )
    item_id: str
    content_index: int = 0
    delta: str


class DurationUsage(BaseModel):
    type: Literal["duration"] = "duration"
    seconds: float


class TranscriptionCompleted(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.completed"] = (
        "conversation.item.input_audio_transcription.completed"
    )
    item_id: str
    content_index: int = 0
    transcript: str
    usage: DurationUsage


class ItemError(BaseModel):
    """An item's failure: as `ErrorDetail`, less the client event (no client event failed)."""

    type: Literal["invalid_request_error", "server_error"]
    code: str | None = None
    message: str
    param: str | None = None


class TranscriptionFailed(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.failed"] = (
        "conversation.item.input_audio_transcription.failed"
    )
    item_id: str
    content_index: int = 0
    error: ItemError

    def wire(self) -> dict[str, Any]:
        """OpenAI leaves out an item error's `param` and `code` when there are none (a strict
        client's schema refuses a null there)."""
        wire = super().wire()
        wire["error"] = {key: value for key, value in wire["error"].items() if value is not None}
        return wire


class TranscriptionPartial(ServerEvent):
    """The whole current hypothesis, unstable tail included (this server's extension)."""

    type: Literal["mstar.transcription.partial"] = "mstar.transcription.partial"
    item_id: str
    #: The hypothesis; its first `stable_chars` characters are forced from now on.
    text: str
    stable_chars: int
    #: Audio the hypothesis covers, from the item's start, on the client's timeline.
    audio_seconds: float


# -- session events to the wire ----------------------------------------------------------


def server_event(
    event: out.ServerEvent, generation: Generation, client_secret: dict[str, Any] | None = None
) -> ServerEvent:
    """The wire model of a session output event, for a client of `generation`; `client_secret`
    is the ephemeral key the session was opened with, if any."""
    if isinstance(event, out.SessionConfigured):
        return session_event(event, generation, client_secret)
    return speech_event(event)


def speech_event(event: speech.SpeechEvent) -> ServerEvent:
    """What the speech front says, as both sessions send it (alike in both generations)."""
    if isinstance(event, speech.Committed):
        return InputAudioBufferCommitted(item_id=event.item_id, previous_item_id=event.previous_item_id)
    if isinstance(event, speech.Cleared):
        return InputAudioBufferCleared()
    if isinstance(event, speech.SpeechStarted):
        return SpeechStarted(audio_start_ms=event.audio_start_ms, item_id=event.item_id)
    if isinstance(event, speech.SpeechStopped):
        return SpeechStopped(audio_end_ms=event.audio_end_ms, item_id=event.item_id)
    if isinstance(event, speech.TimeoutTriggered):
        return TimeoutTriggered(
            audio_start_ms=event.audio_start_ms, audio_end_ms=event.audio_end_ms, item_id=event.item_id
        )
    if isinstance(event, speech.Delta):
        return TranscriptionDelta(item_id=event.item_id, delta=event.delta)
    if isinstance(event, speech.Completed):
        return TranscriptionCompleted(
            item_id=event.item_id, transcript=event.transcript, usage=DurationUsage(seconds=event.seconds)
        )
    if isinstance(event, speech.Failed):
        return TranscriptionFailed(item_id=event.item_id, error=item_error(event.error))
    if isinstance(event, speech.Partial):
        return TranscriptionPartial(
            item_id=event.item_id,
            text=event.text,
            stable_chars=event.stable_chars,
            audio_seconds=event.audio_seconds,
        )
    return ErrorEvent(error=error_detail(event.error, event.event_id))


def wire_event(
    event: out.ServerEvent, generation: Generation, client_secret: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`server_event` as the JSON object sent."""
    return server_event(event, generation, client_secret).wire()


def error_detail(error: DragomanError, event_id: str | None) -> ErrorDetail:
    """A client fault is quoted; a server fault shows only its error id (errors.py)."""
    if isinstance(error, ServerError):
        return ErrorDetail(
            type="server_error", code=error.code, message=error.public_message, event_id=event_id
        )
    return ErrorDetail(
        type="invalid_request_error",
        code=error.code,
        message=error.message,
        param=error.param,
        event_id=event_id,
    )


def item_error(error: DragomanError) -> ItemError:
    return ItemError.model_validate(error_detail(error, None).model_dump(exclude={"event_id"}))


def noise_reduction_object(setting: NoiseReduction | None) -> dict[str, Any] | None:
    """`audio.input.noise_reduction` as GA's session objects write it (`{type, strength}`)."""
    return None if setting is None else {"type": setting.type, "strength": setting.strength}


def turn_detection_object(config: TurnConfig | None) -> dict[str, Any] | None:
    """A session object's `turn_detection`: the mode and its own fields (the gates are ours and
    stay off the wire, which OpenAI's types would refuse)."""
    if config is None:
        return None
    if isinstance(config, SemanticVADConfig):
        return {"type": "semantic_vad", "eagerness": config.eagerness}
    fields: dict[str, Any] = {
        "type": "server_vad",
        "threshold": config.threshold,
        "prefix_padding_ms": config.prefix_padding_ms,
        "silence_duration_ms": config.silence_duration_ms,
    }
    if config.idle_timeout_ms is not None:  # GA only: beta has no idle timeout, nor sets one
        fields["idle_timeout_ms"] = config.idle_timeout_ms
    return fields


#: The beta session's `client_secret` when the session was opened without an ephemeral key:
#: no key (an empty value, expired at the epoch), in the shape the SDK's type requires.
NO_CLIENT_SECRET: dict[str, Any] = {"value": "", "expires_at": 0}


def session_event(
    event: out.SessionConfigured, generation: Generation, client_secret: dict[str, Any] | None = None
) -> SessionEvent:
    """`session.created/updated` (GA) or `transcription_session.created/updated` (beta).

    Beta's `TranscriptionSession` requires `client_secret` (`value`, `expires_at`): the
    ephemeral key the session was opened with (`POST /v1/realtime/client_secrets`; spent,
    since a key opens one session), or `NO_CLIENT_SECRET`. Its transcription `model` names
    only OpenAI's models, so a beta client is told none (GA's names the engine)."""
    config = event.config
    transcription = {
        # Honest: the engine that serves the session, whatever model the client named.
        "model": event.engine_name,
        "language": config.language,
        "prompt": config.prompt,
    }
    turn_detection = turn_detection_object(config.turn_detection)
    mstar = {
        "chunk_seconds": config.chunk_seconds,
        "unfixed_chunks": config.unfixed_chunks,
        "unfixed_tokens": config.unfixed_tokens,
        "max_item_seconds": event.max_item_seconds,
        "partials": event.partials,
    }
    body: dict[str, Any] = {"id": event.session_id, "object": "realtime.transcription_session"}
    if generation is Generation.GA:
        kind: SessionEventType = "session.created" if event.created else "session.updated"
        body |= {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": format_for(Generation.GA, config.input_rate),
                    "transcription": transcription,
                    "turn_detection": turn_detection,
                    "noise_reduction": noise_reduction_object(config.noise_reduction),
                }
            },
            "include": None,
        }
    else:
        kind = "transcription_session.created" if event.created else "transcription_session.updated"
        body |= {
            "modalities": ["text"],
            "input_audio_format": format_for(Generation.BETA, config.input_rate),
            "input_audio_transcription": transcription | {"model": None},
            "turn_detection": turn_detection,
            "client_secret": dict(client_secret or NO_CLIENT_SECRET),
        }
    body["mstar"] = mstar
    return SessionEvent(type=kind, session=body)
