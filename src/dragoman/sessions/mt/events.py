"""Events in and out of an MT session (MT protocol v1), free of any wire format.

`dragoman.protocol.mt` turns JSON frames into the input events and the output
events into JSON frames; the session (`dragoman.sessions.mt.session`) only sees these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from dragoman.engines.mt.base import MTRequest
from dragoman.engines.workers import CancelToken, Priority
from dragoman.streaming.alignatt import Frontier

PROTOCOL_VERSION = 1


class ErrorCode(StrEnum):
    """MT protocol v1's error codes; the only ones a client is ever sent."""

    #: The client broke the protocol (bad frame, bad value, wrong order); see MTSession.
    BAD_PROTOCOL = "bad_protocol"
    UNSUPPORTED_DIRECTION = "unsupported_direction"
    #: The server is at --max-sessions.
    BUSY = "busy"
    #: That update was dropped; the session stays usable.
    PROCESSING_FAILED = "processing_failed"


@dataclass(frozen=True)
class Word:
    text: str
    start_ms: float | None = None
    end_ms: float | None = None


@dataclass(frozen=True)
class Init:
    protocol_version: int
    source_lang: str
    target_lang: str
    preset: str | None = None
    overrides: Mapping[str, object] = field(default_factory=dict)
    context_text: str | None = None
    history: tuple[tuple[str, str], ...] = ()
    accepted_target_prefix: str = ""


@dataclass(frozen=True)
class Update:
    seq: int
    utterance_id: int
    #: Every committed word of the open utterance, in order (full state, not a delta).
    words: tuple[Word, ...]
    #: The ASR's unstable tail: drafted over, never committed against.
    tail: tuple[str, ...]
    clock_ms: float
    is_final: bool = False


ClientEvent = Init | Update


@dataclass(frozen=True)
class InitOk:
    direction: str
    preset: str
    model: str
    protocol_version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Translation:
    seq: int
    utterance_id: int
    final: bool
    committed_text: str
    committed_delta: str
    buffer_text: str
    covered_source_units: int | None
    stop_reason: str
    forced_final: bool = False


@dataclass(frozen=True)
class Error:
    code: ErrorCode
    message: str
    #: Directions the server serves (unsupported_direction only).
    supported: tuple[str, ...] | None = None
    #: The update the error answers, when there is one.
    seq: int | None = None
    #: processing_failed: the id under which the failure is logged.
    error_id: str | None = None


ServerEvent = InitOk | Translation | Error


class JobKind(StrEnum):
    PARTIAL = "partial"
    FINAL = "final"
    #: A partial update past --max-utterance-words, translated as final.
    FORCED_FINAL = "forced_final"
    #: The next utterance's prompt head into the engine's cache, in the pause after one closed.
    PREFILL = "prefill"


@dataclass(frozen=True)
class MTJob:
    """One engine call the session needs; `request` is what to pass to `MTEngine.draft`."""

    seq: int
    utterance_id: int
    kind: JobKind
    request: MTRequest
    frontier: Frontier
    cancel: CancelToken = field(default_factory=CancelToken, compare=False)
    #: A person reads the translation as it comes.
    priority: Priority = Priority.INTERACTIVE
    #: PARTIAL: the engine hands over its draft after each pass (`MTRequest.on_pass`), and what
    #: the policy commits of it goes out at once, under this job's seq (`MTSession.job_progress`).
    streaming: bool = False
