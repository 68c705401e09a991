"""Engine work for every session, in one place: queues that batch, prioritise and cancel.

Sessions never call an engine and never hold a lock around one. Their driver
takes a *turn* on the engine's worker, asks the session for its job only then,
and runs it:

    async with worker.turn(priority) as slot:
        job = session.next_job()
        result = await slot.run(job.request, job.cancel)

Planning inside the turn means a job is built from the session's latest state
when the engine is about to be free, not when it was queued, so an MT session
whose partial updates arrive faster than the engine drafts never pays for a stale
one. A worker runs one engine in one thread, so calls never overlap:

- `BatchingWorker` grants turns at once and gathers what is queued into one call
  whenever the engine is free ("each step is an ordinary request, so sessions
  batch on the engine like any other traffic"): oldest first, up to `max_batch`,
  those sharing the oldest one's `batch_key`. While a call runs, new requests
  queue for the next one, so the batch adapts to the load with no timer and no
  added latency when idle.
- `SerialWorker` grants one turn at a time, highest priority first and in arrival
  order within a priority. A session holds at most one job in flight, so sessions
  of equal priority take turns round-robin and a busy one cannot starve the rest.

A request whose `CancelToken` is set before its call starts is dropped; engines
that stream check the token between tokens or chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, TypeVar

from dragoman.errors import ClientError, EngineFailure, ServerError
from dragoman.logs import get_logger, log_failure

log = get_logger(__name__)

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")
T = TypeVar("T")

#: How long shutdown waits for the engine call in flight before releasing the engine.
CLOSE_TIMEOUT_S = 60.0


class Priority(IntEnum):
    """Lower runs first."""

    #: A person is waiting on it now: an agent's reply, a translation update.
    INTERACTIVE = 0
    #: Streaming work that keeps pace with audio: transcription steps.
    STREAMING = 1
    #: Housekeeping: dropping caches of closed sessions.
    BACKGROUND = 2


class CancelToken:
    """Set by a session that no longer wants a job's result; read by workers and engines.

    Thread-safe: engines read it from the worker thread between tokens or chunks.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

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


@dataclass(frozen=True)
class WorkerStats:
    #: Engine calls made (failed ones included).
    calls: int
    #: Requests those calls carried.
    requests: int
    #: Calls that raised (each of their requests got an EngineFailure).
    failures: int
    #: Requests dropped because they were cancelled before their call.
    cancelled: int
    #: Batch size -> number of calls of that size.
    batch_sizes: dict[int, int]
    #: Requests waiting for a call now.
    queued: int

    @property
    def mean_batch(self) -> float:
        return self.requests / self.calls if self.calls else 0.0


@dataclass
class _Pending(Generic[RequestT, ResultT]):
    request: RequestT
    key: Hashable
    cancel: CancelToken
    future: asyncio.Future[ResultT]

    @property
    def live(self) -> bool:
        return not (self.future.done() or self.cancel.cancelled)


@dataclass
class _Counters:
    calls: int = 0
    requests: int = 0
    failures: int = 0
    cancelled: int = 0
    sizes: Counter[int] = field(default_factory=Counter)


class BatchingWorker(Generic[RequestT, ResultT]):
    """One engine that can serve many requests per call.

    `call` runs in the worker thread and returns one result per request, in order;
    a result that is a `ClientError` fails only its own request.
    """

    def __init__(
        self,
        call: Callable[[Sequence[RequestT]], Sequence[ResultT | ClientError]],
        *,
        name: str,
        max_batch: int = 16,
        batch_key: Callable[[RequestT], Hashable] | None = None,
        tags: Callable[[RequestT], dict[str, str]] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.name = name
        self.max_batch = max_batch
        self._call = call
        self._batch_key = batch_key or (lambda request: None)
        self._tags = tags or (lambda request: {})
        self._queue: list[_Pending[RequestT, ResultT]] = []
        self._in_flight: list[_Pending[RequestT, ResultT]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._n = _Counters()

    @property
    def stats(self) -> WorkerStats:
        n = self._n
        return WorkerStats(
            calls=n.calls,
            requests=n.requests,
            failures=n.failures,
            cancelled=n.cancelled,
            batch_sizes=dict(sorted(n.sizes.items())),
            queued=sum(1 for p in self._queue if p.live),
        )

    async def start(self) -> None:
        """Start the worker task (`submit` does it on first use)."""
        if self._closed:
            raise EngineFailure(f"the {self.name} worker is closed")
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.name}-worker")

    async def close(self) -> None:
        """Stop taking requests; waiting and running ones fail with `EngineFailure`."""
        self._closed = True
        leftover = self._queue + self._in_flight
        self._queue = []
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for pending in leftover:
            if not pending.future.done():
                pending.future.set_exception(EngineFailure(f"the {self.name} worker closed first"))

    async def __aenter__(self) -> BatchingWorker[RequestT, ResultT]:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @contextlib.asynccontextmanager
    async def turn(
        self, priority: Priority = Priority.STREAMING
    ) -> AsyncIterator[BatchingWorker[RequestT, ResultT]]:
        """Granted at once: concurrent requests batch instead of taking turns."""
        yield self

    async def run(self, request: RequestT, cancel: CancelToken | None = None) -> ResultT:
        return await self.submit(request, cancel)

    async def submit(self, request: RequestT, cancel: CancelToken | None = None) -> ResultT:
        """Serve one request; raises its `ClientError`, `EngineFailure` when the call fails,
        or `JobCancelled` when `cancel` was set before its call started."""
        await self.start()
        try:
            key = self._batch_key(request)
        except Exception as exc:
            error_id = log_failure(log, f"{self.name} batch key failed", exc, **self._tags(request))
            raise EngineFailure(f"the {self.name} engine failed", error_id=error_id) from exc
        future: asyncio.Future[ResultT] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(request, key, cancel or CancelToken(), future))
        self._wake.set()
        # A cancelled submitter cancels its future; the worker skips or ignores it.
        return await future

    def _take(self) -> list[_Pending[RequestT, ResultT]]:
        """The next call's requests: the oldest live one and those that may share its call."""
        live = []
        for pending in self._queue:
            if pending.live:
                live.append(pending)
            elif not pending.future.done():  # cancelled before its call
                self._n.cancelled += 1
                pending.future.set_exception(JobCancelled("cancelled before it ran"))
        self._queue = live
        if not live:
            return []
        key = live[0].key
        batch: list[_Pending[RequestT, ResultT]] = []
        rest: list[_Pending[RequestT, ResultT]] = []
        for pending in live:
            (batch if len(batch) < self.max_batch and pending.key == key else rest).append(pending)
        self._queue = rest
        return batch

    async def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._in_flight = batch
            try:
                await self._serve(batch)
            finally:
                self._in_flight = []

    async def _serve(self, batch: list[_Pending[RequestT, ResultT]]) -> None:
        n = self._n
        n.calls += 1
        n.requests += len(batch)
        n.sizes[len(batch)] += 1
        started = time.perf_counter()
        try:
            results = await asyncio.to_thread(self._call, [p.request for p in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"engine returned {len(results)} results for {len(batch)} requests")
        except Exception as exc:
            n.failures += 1
            if len(batch) > 1:
                # One session's bad request must not fail the others it was batched with: each
                # request is tried alone, and only those that fail alone get the error.
                log.warning(f"{self.name} batch failed; retrying its requests one by one", batch=len(batch))
                for pending in batch:
                    await self._serve([pending])
                return
            sessions = sorted({self._tags(p.request).get("session", "") for p in batch})
            error_id = log_failure(
                log, f"{self.name} engine call failed", exc, batch=len(batch), sessions=sessions
            )
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(
                        EngineFailure(f"the {self.name} engine failed", error_id=error_id)
                    )
            return
        log.debug(f"{self.name} call", batch=len(batch), seconds=round(time.perf_counter() - started, 3))
        for pending, result in zip(batch, results, strict=True):
            if pending.future.done():
                continue  # its submitter went away
            if isinstance(result, ClientError):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)


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
        self.calls = 0
        self.cancelled = 0

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

    async def run(self, request: RequestT, cancel: CancelToken | None = None) -> ResultT:
        """Call the engine with `request` in the worker thread (inside a turn)."""
        if cancel is not None and cancel.cancelled:
            self.cancelled += 1
            raise JobCancelled("cancelled before it ran")
        self.calls += 1
        return await self.call(lambda: self._call(request))

    async def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the engine's thread (inside a turn); shutdown waits for it to end."""
        in_flight: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(fn))
        self._in_flight = in_flight  # type: ignore[assignment]
        try:
            # Shielded: a session that goes away must not release the engine under a running call.
            return await asyncio.shield(in_flight)
        except asyncio.CancelledError:
            # The turn ends when this returns, and the next caller must not run beside the
            # thread; its job's CancelToken is set, so the engine stops within a token or chunk.
            await asyncio.wait([in_flight])
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


class Housekeeping:
    """Engine work no session waits for, such as dropping a closed session's cache: run in a
    background turn on the engine's worker, after the work that waits, and cancelled at close."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, worker: SerialWorker[Any, Any], fn: Callable[[], object], name: str) -> None:
        async def run() -> None:
            async with worker.turn(Priority.BACKGROUND) as slot:
                await slot.call(fn)

        task = asyncio.create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
