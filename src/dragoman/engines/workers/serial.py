"""`SerialWorker`: one turn at a time on the engine, highest priority first, in arrival order
within a priority (see the package's docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

from dragoman.engines.workers.calls import (
    CLOSE_TIMEOUT_S,
    Beat,
    CancelToken,
    JobCancelled,
    Priority,
    await_call,
    timed_out,
)
from dragoman.engines.workers.threads import EngineThreads
from dragoman.errors import EngineFailure

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")
T = TypeVar("T")


class SerialWorker(Generic[RequestT, ResultT]):
    """One engine that serves one request at a time, in turns by priority, then arrival."""

    def __init__(self, call: Callable[[RequestT], ResultT], *, name: str) -> None:
        self.name = name
        self._call = call
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._busy = False
        self._in_flight: asyncio.Future[object] | None = None
        self._closed = False
        self._threads = EngineThreads(name, 1)
        self.calls = 0
        self.cancelled = 0
        #: Calls given up as hung (their threads left to end on their own).
        self.abandoned = 0

    @property
    def waiting(self) -> int:
        """Callers waiting for a turn now."""
        return sum(1 for _, _, granted in self._waiting if not granted.done())

    @contextlib.asynccontextmanager
    async def turn(
        self, priority: Priority = Priority.INTERACTIVE
    ) -> AsyncIterator[SerialWorker[RequestT, ResultT]]:
        """Wait for the engine; it is this caller's until the block ends."""
        if self._closed:
            raise EngineFailure(f"the {self.name} worker is closed")
        if self._busy or self._waiting:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (int(priority), next(self._order), granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # granted just as the caller went away: pass it on
                raise
        else:
            self._busy = True
        try:
            yield self
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            _, _, granted = heapq.heappop(self._waiting)
            if not granted.done():
                granted.set_result(None)  # the engine passes straight to the next caller
                return
        self._busy = False

    async def run(
        self,
        request: RequestT,
        cancel: CancelToken | None = None,
        timeout_s: float | None = None,
        priority: Priority | None = None,
    ) -> ResultT:
        """Call the engine with `request` in the worker thread (inside a turn); raises
        `EngineFailure` once the call shows no life (no end, no piece) for `timeout_s`.
        (`priority` is the batching worker's; here the turn was already granted by priority.)"""
        if cancel is not None and cancel.cancelled:
            self.cancelled += 1
            raise JobCancelled("cancelled before it ran")
        self.calls += 1
        beat = Beat()
        live = beat.wrap(request)
        try:
            return await self.call(lambda: self._call(live), timeout_s, beat)
        except TimeoutError:
            if cancel is not None:
                cancel.cancel()  # an engine that checks its token stops
            raise timed_out(self.name, timeout_s) from None

    async def call(self, fn: Callable[[], T], timeout_s: float | None = None, beat: Beat | None = None) -> T:
        """Run `fn` on the engine's thread (inside a turn); shutdown waits for it to end.

        Past `timeout_s` with no life (`beat`) raises TimeoutError and releases the turn: the
        hung thread is abandoned, and shutdown still waits (bounded) for it."""
        in_flight = self._threads.run(fn)
        self._in_flight = in_flight  # type: ignore[assignment]
        try:
            # Never cancelled: a session that goes away must not release the engine under a
            # running call.
            return await await_call(in_flight, timeout_s, beat or Beat())
        except TimeoutError:
            self._threads.abandon(in_flight)
            self.abandoned += 1
            raise
        except asyncio.CancelledError:
            # The turn ends when this returns, and the next caller must not run beside the
            # thread; its job's CancelToken is set, so the engine stops within a token or chunk
            # (one that does not is abandoned at its timeout, as above).
            await asyncio.wait([in_flight], timeout=timeout_s)
            raise
        finally:
            if in_flight.done():
                self._in_flight = None

    async def close(self) -> None:
        """Refuse new turns and wait (bounded) for the call in flight."""
        self._closed = True
        for _, _, granted in self._waiting:
            if not granted.done():
                granted.set_exception(EngineFailure(f"the {self.name} worker closed first"))
        self._waiting.clear()
        if self._in_flight is not None:
            await asyncio.wait([self._in_flight], timeout=CLOSE_TIMEOUT_S)
        self._threads.close()
