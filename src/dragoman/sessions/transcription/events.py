"""Events in and out of a transcription session, free of any wire format.

`protocol/realtime/client_parsers.py` turns the client's JSON into the input events and
`protocol/realtime/server_events.py` turns the output events into OpenAI Realtime
server events of the client's generation (beta or GA); the session
(`dragoman.sessions.transcription.session`) only sees these. Each input event carries the
client's `event_id` so that an error it causes can quote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.sessions.speech.config import SessionConfig
from dragoman.sessions.speech.events import (
    AppendAudio,
    ClearBuffer,
    Cleared,
    CommitBuffer,
    Committed,
    Completed,
    Delta,
    Error,
    Failed,
    Partial,
    Rejected,
    SpeechEvent,
    SpeechStarted,
    SpeechStopped,
    TimeoutTriggered,
)

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
    #: Whether the client asked for `mstar.transcription.partial` events.
    partials: bool = False


ServerEvent = SessionConfigured | SpeechEvent

__all__ = [
    "AppendAudio",
    "ClearBuffer",
    "Cleared",
    "ClientEvent",
    "CommitBuffer",
    "Committed",
    "Completed",
    "Delta",
    "Error",
    "Failed",
    "Partial",
    "Rejected",
    "ServerEvent",
    "SessionConfigured",
    "SpeechStarted",
    "SpeechStopped",
    "TimeoutTriggered",
    "UpdateSession",
]
