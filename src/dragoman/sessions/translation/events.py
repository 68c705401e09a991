"""Events in and out of a translation session (OpenAI's Realtime translation), free of any wire format.

`protocol/realtime/translation_client.py` turns the client's JSON into the input events and
`protocol/realtime/translation_server.py` turns the output events into OpenAI's server events;
the session (`sessions/translation/session.py`) only sees these. There are no turns, items
or responses on this wire: audio goes in, translated text and speech come out, each
delta stamped with `elapsed_ms` on the input stream's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.sessions.speech.events import AppendAudio, Error, Rejected
from dragoman.sessions.translation.config import TranslationConfig

# -- in ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateSession:
    """`session.update`, checked for its wire types; absent fields are not in `values`.

    Keys are `TranslationConfig.patched`'s: language, transcription (a model name or None),
    noise_reduction (a `NoiseReductionUpdate` or None). All apply, or none.
    """

    values: Mapping[str, Any] = field(default_factory=dict)
    event_id: str | None = None


@dataclass(frozen=True)
class CloseSession:
    """`session.close`: flush the input, say the rest, then `session.closed`."""

    event_id: str | None = None


ClientEvent = UpdateSession | AppendAudio | CloseSession | Rejected

# -- out ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionConfigured:
    """`session.created` (first) or `session.updated` (after each accepted update)."""

    created: bool
    session_id: str
    #: The model the session was opened with (fixed for its life).
    model: str
    config: TranslationConfig
    #: Seconds since the epoch.
    expires_at: int
    #: The engine that transcribes the source, reported as the transcription model.
    transcription_engine: str


@dataclass(frozen=True)
class InputTranscriptDelta:
    """Append-only source text (only while transcription is configured)."""

    delta: str
    elapsed_ms: int


@dataclass(frozen=True)
class OutputTranscriptDelta:
    """Append-only translated text."""

    delta: str
    elapsed_ms: int


@dataclass(frozen=True)
class OutputAudioDelta:
    """One 200 ms frame of translated speech, PCM16 mono; `elapsed_ms` is where it starts
    on the output timeline, which shares the input stream's clock."""

    pcm: bytes
    sample_rate: int
    elapsed_ms: int


@dataclass(frozen=True)
class SessionClosed:
    pass


ServerEvent = (
    SessionConfigured
    | InputTranscriptDelta
    | OutputTranscriptDelta
    | OutputAudioDelta
    | SessionClosed
    | Error
)

__all__ = [
    "AppendAudio",
    "ClientEvent",
    "CloseSession",
    "Error",
    "InputTranscriptDelta",
    "OutputAudioDelta",
    "OutputTranscriptDelta",
    "Rejected",
    "ServerEvent",
    "SessionClosed",
    "SessionConfigured",
    "UpdateSession",
]
