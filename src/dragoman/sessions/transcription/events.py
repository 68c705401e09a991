"""Events in and out of a transcription session, free of any wire format.

`protocol/realtime/client_events.py` turns the client's JSON into the input events and
`protocol/realtime/server_events.py` turns the output events into OpenAI Realtime
server events of the client's generation (beta or GA); the session
(`dragoman.sessions.transcription.session`) only sees these. Each input event carries the
client's `event_id` so that an error it causes can quote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.errors import DragomanError
from dragoman.sessions.transcription.config import SessionConfig

# -- in ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateSession:
    """A session update, checked for its wire types; absent fields are not in `values`.

    Keys are `SessionConfig` fields: model, language, prompt, input_rate,
    turn_detection (a ServerVADConfig or None), chunk_seconds, unfixed_chunks,
    unfixed_tokens. The session applies all of them or none.
    """

    values: Mapping[str, Any] = field(default_factory=dict)
    event_id: str | None = None


@dataclass(frozen=True)
class AppendAudio:
    #: Base64 PCM16 at the session's input rate (decoded by the session, which carries the odd byte).
    audio: str
    event_id: str | None = None


@dataclass(frozen=True)
class CommitBuffer:
    event_id: str | None = None


@dataclass(frozen=True)
class ClearBuffer:
    event_id: str | None = None


@dataclass(frozen=True)
class Rejected:
    """An event the protocol or the transport refused (bad JSON, a binary frame, a server fault).

    It goes through the session only so that its `error` event is sent in order with
    the session's other events; the session changes nothing.
    """

    error: DragomanError
    event_id: str | None = None


ClientEvent = UpdateSession | AppendAudio | CommitBuffer | ClearBuffer | Rejected

# -- out ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionConfigured:
    """The session's settings, on creation and after each accepted update."""

    created: bool
    session_id: str
    config: SessionConfig
    #: The model reported when the client named none.
    engine_name: str
    #: The longest item the session transcribes.
    max_item_seconds: float


@dataclass(frozen=True)
class Committed:
    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True)
class Cleared:
    pass


@dataclass(frozen=True)
class SpeechStarted:
    audio_start_ms: int
    item_id: str


@dataclass(frozen=True)
class SpeechStopped:
    audio_end_ms: int
    item_id: str


@dataclass(frozen=True)
class Delta:
    """Firm text appended to the item's transcript (never revised)."""

    item_id: str
    delta: str


@dataclass(frozen=True)
class Completed:
    item_id: str
    transcript: str
    #: The item's audio on the client's timeline.
    seconds: float


@dataclass(frozen=True)
class Failed:
    """The item's final step failed; the item is dropped, the session goes on."""

    item_id: str
    error: DragomanError


@dataclass(frozen=True)
class Partial:
    """The whole current hypothesis; its first `stable_chars` characters are forced from now on."""

    item_id: str
    text: str
    stable_chars: int
    #: Audio the hypothesis covers, from the item's start, on the client's timeline.
    audio_seconds: float


@dataclass(frozen=True)
class Error:
    """A fault that fails no item: a refused client event (`event_id`) or a failed partial step."""

    error: DragomanError
    event_id: str | None = None


ServerEvent = (
    SessionConfigured
    | Committed
    | Cleared
    | SpeechStarted
    | SpeechStopped
    | Delta
    | Completed
    | Failed
    | Partial
    | Error
)
