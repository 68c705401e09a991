"""What one engine call carries, whichever worker runs it: its priority, its cancel token,
its streamed pieces, and the watch that gives up a call that hangs.

An engine call that hangs must not take the engine from every other session for good:
a call given a `timeout_s` that has not ended by then (a streaming call: that has made
no piece for that long) fails its request(s) with an `EngineFailure` and an error id,
its token is set, and the worker goes on with the next call in a fresh thread. The
abandoned thread runs until the engine returns; its result is dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Generic, TypeVar

from dragoman.errors import EngineFailure, ServerError
from dragoman.logs import get_logger

log = get_logger(__name__)

RequestT = TypeVar("RequestT")
T = TypeVar("T")

#: How long shutdown waits for the engine call in flight before releasing the engine.
CLOSE_TIMEOUT_S = 60.0
#: How long one engine call (a streaming one: between two pieces) may take before it is
#: given up as hung (`Settings.engine_timeout_s`).
DEFAULT_CALL_TIMEOUT_S = 120.0


class Priority(IntEnum):
    """Lower runs first."""

    #: A person is waiting on it now: an agent's reply, a translation update, the final step
    #: of a committed item.
    INTERACTIVE = 0
    #: Streaming work that keeps pace with audio: transcription steps.
    STREAMING = 1
    #: Work a client waits on as a whole, not at audio pace: windows of an uploaded file.
    BULK = 2
    #: The steps of a session whose audio arrives faster than real time (a flood, or a file
    #: pushed down a socket): served in the gaps the others leave, never in their calls.
    AHEAD = 3
    #: Housekeeping: dropping caches of closed sessions.
    BACKGROUND = 4


class CancelToken:
    """Set by a session that no longer wants a job's result; read by workers and engines.

    Thread-safe: engines read it from the worker thread between tokens or chunks, and a
    session may set it from the thread that takes a large append. A worker that queues
    the job registers `on_cancel` to take it out of its queue at once.
    """

    __slots__ = ("_callbacks", "_event", "_lock")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` (in the cancelling thread) when the token is set, now if it is;
        returns what unregisters it (a token can outlive many jobs, as a file's does)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@dataclass(frozen=True)
class Streamed(Generic[RequestT]):
    """A streaming engine call's request: the engine calls `emit` with each piece it makes,
    from its own thread, and checks `cancel` between pieces."""

    request: RequestT
    cancel: CancelToken
    emit: Callable[[object], None]


class JobCancelled(ServerError):
    """The job was cancelled before or while it ran; its session already moved on."""

    code = "job_cancelled"


class Beat:
    """When a call last showed life: its start, then each piece a streaming call made."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = time.monotonic()

    def wrap(self, request: Any) -> Any:
        """`request` with its pieces counted as life (a `Streamed` one), else as it is."""
        if not isinstance(request, Streamed):
            return request
        emit = request.emit

        def beat(piece: object) -> None:
            self.last = time.monotonic()  # a float store: safe from the engine's thread
            emit(piece)

        return dataclasses.replace(request, emit=beat)


async def await_call(future: asyncio.Future[T], timeout_s: float | None, beat: Beat) -> T:
    """The call's result; TimeoutError once it has shown no life for `timeout_s`. `future`
    itself is never cancelled (the thread cannot be stopped)."""
    while True:
        remaining = None if timeout_s is None else timeout_s - (time.monotonic() - beat.last)
        if remaining is not None and remaining <= 0:
            raise TimeoutError
        done, _ = await asyncio.wait([future], timeout=remaining)
        if done:
            return future.result()


def timed_out(name: str, timeout_s: float | None, **fields: Any) -> EngineFailure:
    """The error of a hung call, logged under its error id."""
    error = EngineFailure(f"the {name} engine did not answer within {timeout_s:g} s")
    log.error(f"{name} engine call timed out", error_id=error.error_id, seconds=timeout_s, **fields)
    return error
