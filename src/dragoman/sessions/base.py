"""The one contract every session keeps with the driver that runs it.

A session is a sans-I/O state machine, in the way python-websockets' `protocol.py`
and h11 are: it never touches a socket, a thread or an engine. Its driver
(`transports/driver.py`, one for every service and transport) moves events and
results in and out, always in this order:

1. A client event arrives: `receive(event)`.
2. Then `events_to_send()`: what the session says now goes out, in order.
3. Then, for each of the session's lanes (one engine worker each), while
   `next_job(lane)` returns a job, run it on that lane's worker (at most the number
   of jobs the session allows in flight per lane; every session here allows one).
   A transcription or MT session has one lane; a voice agent has three (speech to
   text, the LLM and text to speech), so it listens while it thinks and speaks.
4. A streaming job (`streaming` true: LLM tokens, TTS chunks) reports each piece as
   the engine makes it: `job_progress(job, piece)`, then step 2. An engine call
   ends: `job_done(job, result)` or `job_failed(job, error)`; then back to step 2.
5. After each of these, `close_code`: when it is set, the driver sends what is
   left and closes the connection with it.

Nothing else calls a session. A session never raises for a client's fault: it
answers with its protocol's error event and goes on. An exception out of a session
is a bug; the driver logs it under an error id, tells the client that id, and keeps
the connection (and every other session on the same engine) alive.

Engine jobs carry a `CancelToken`. A session that no longer wants a job's result
(a barge-in, a cleared buffer, a superseded draft) cancels it; the worker drops a
cancelled job that has not started, and an engine that streams checks the token
between tokens or chunks, so cancelled work stops using the CPU. A result that
arrives for a cancelled job is still handed back through `job_done`, and the
session ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, TypeVar, runtime_checkable

from dragoman.engines.workers import CancelToken, Priority
from dragoman.errors import DragomanError

__all__ = ["DEFAULT_LANE", "CloseCode", "Job", "Observation", "Observed", "Session", "StreamingSession"]

#: The lane of a session with one engine.
DEFAULT_LANE = "engine"


class CloseCode(IntEnum):
    """WebSocket close codes (RFC 6455, section 7.4.1) the sessions and transports use."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    TRY_AGAIN_LATER = 1013


ClientEventT = TypeVar("ClientEventT", contravariant=True)
ServerEventT = TypeVar("ServerEventT")
JobT = TypeVar("JobT", bound="Job")
ResultT = TypeVar("ResultT", contravariant=True)


class Job(Protocol):
    """What every engine job carries: the engine request, its cancellation and priority."""

    @property
    def request(self) -> object: ...

    @property
    def cancel(self) -> CancelToken: ...

    @property
    def priority(self) -> Priority: ...


class Session(Protocol[ClientEventT, ServerEventT, JobT, ResultT]):
    session_id: str

    def receive(self, event: ClientEventT) -> None:
        """Take one client event (parsed by the protocol layer, or its parse error).

        Then the driver calls `events_to_send()`, then `next_job()`.
        """

    def events_to_send(self) -> list[ServerEventT]:
        """The server events produced since the last call, oldest first; the driver sends them in order."""

    def next_job(self, lane: str = DEFAULT_LANE) -> JobT | None:
        """The next engine job to run on `lane`, or None when there is none or one is still in flight.

        The driver runs it on the lane's engine worker and reports its outcome with
        `job_done` or `job_failed`; it calls `next_job()` again after each outcome
        and after each client event.
        """

    def job_done(self, job: JobT, result: ResultT) -> None:
        """The engine finished `job`. Then `events_to_send()`, then `next_job()`."""

    def job_failed(self, job: JobT, error: DragomanError) -> None:
        """The engine call for `job` failed (a client fault such as an unsupported
        language, or a server fault with its error id). The session reports it in its
        protocol's terms. Then `events_to_send()`, then `next_job()`."""

    @property
    def close_code(self) -> int | None:
        """Set once the session is over: the driver sends what is left and closes with it."""


@dataclass(frozen=True)
class Observation:
    """Something a session saw happen that the server counts: `metric` names it (the table in
    `transports/observations.py`), `value` is how much (a count, seconds of audio).

    A session never touches a metric itself, which would tie a sans-I/O machine to one
    process's registry: it hands these to its driver, which records them."""

    metric: str
    value: float = 1.0


@runtime_checkable
class Observed(Protocol):
    """A session that reports observations for the server's metrics."""

    def take_observations(self) -> list[Observation]:
        """What the session observed since the last call, oldest first; the driver records them
        each time it collects the session's events."""


PieceT = TypeVar("PieceT", contravariant=True)


@runtime_checkable
class AudioFed(Protocol):
    """A session fed audio (transcription, the voice agent): how much it has taken, in seconds
    of input, so that its driver can tell a client at real-time pace from one running ahead."""

    @property
    def input_seconds(self) -> float: ...

    def refuse_audio(self, refused: bool) -> None:
        """While `refused`, audio appends are answered with an error and not taken (the
        driver's call, before each frame, for a client far ahead of real time)."""


class StreamingSession(
    Session[ClientEventT, ServerEventT, JobT, ResultT],
    Protocol[ClientEventT, ServerEventT, JobT, ResultT, PieceT],
):
    """A session whose jobs may stream (`job.streaming`): pieces arrive before the job ends."""

    def job_progress(self, job: JobT, piece: PieceT) -> None:
        """The engine made the next piece of `job` (in order, before `job_done`).

        Then `events_to_send()`, then `next_job()` on every lane: a piece may make work
        for another engine (a clause of LLM text becomes a TTS job)."""
