"""What the speech front says: turns, transcripts and their faults, free of any wire format.

The transcription session sends these as they are; the voice agent sends them too
(a turn's transcript) and acts on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.errors import DragomanError

# -- in: the input audio buffer, shared by every speech session --------------------


@dataclass(frozen=True)
class AppendAudio:
    #: Base64 PCM16 at the session's input rate (decoded by the front, which carries the odd byte).
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


# -- out ---------------------------------------------------------------------------


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
class TimeoutTriggered:
    """server_vad's idle_timeout_ms ran out: [audio_start_ms, audio_end_ms) held no speech, and
    is committed as the item `item_id` (its `Committed` follows)."""

    audio_start_ms: int
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
    #: The language the engine heard (detected when the session left it open).
    language: str | None = None


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
    #: The language the engine heard (detected when the session left it open).
    language: str | None = None


@dataclass(frozen=True)
class Error:
    """A fault that fails no item: a refused client event (`event_id`) or a failed partial step."""

    error: DragomanError
    event_id: str | None = None


@dataclass(frozen=True)
class Provisional:
    """The voice agent's early start: the whole transcript of a turn at a pause, before the
    silence ended it. `Completed` follows, or `TurnResumed` if the user goes on. Never sent
    to a client."""

    item_id: str
    transcript: str


@dataclass(frozen=True)
class TurnResumed:
    """Speech came back in a turn that had a `Provisional` transcript."""

    item_id: str


#: What the sessions send on, as it is.
SpeechEvent = (
    Committed
    | Cleared
    | SpeechStarted
    | SpeechStopped
    | TimeoutTriggered
    | Delta
    | Completed
    | Failed
    | Partial
    | Error
)
#: The early start's events: the voice agent prepares its answer on them; the interpreter, which
#: turns the early start on for its final transcripts alone, ignores them.
EarlyEvent = Provisional | TurnResumed
#: Everything the front says.
FrontEvent = SpeechEvent | EarlyEvent
