"""Server events of the Realtime transcription session, as pydantic models.

Field names and shapes follow OpenAI's wire format (PROTOCOLS.md, and the
`openai.types.realtime` models the end-to-end tests validate against).
`mstar.transcription.partial` is the seed's extension event.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


def new_event_id() -> str:
    return "event_" + uuid.uuid4().hex[:20]


def new_item_id() -> str:
    return "item_" + uuid.uuid4().hex[:20]


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


class TranscriptionFailed(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.failed"] = (
        "conversation.item.input_audio_transcription.failed"
    )
    item_id: str
    content_index: int = 0
    error: ErrorDetail


class TranscriptionPartial(ServerEvent):
    """The whole current hypothesis, unstable tail included (the seed's extension)."""

    type: Literal["mstar.transcription.partial"] = "mstar.transcription.partial"
    item_id: str
    #: The hypothesis; its first `stable_chars` characters are forced from now on.
    text: str
    stable_chars: int
    #: Audio the hypothesis covers, from the item's start, on the client's timeline.
    audio_seconds: float
