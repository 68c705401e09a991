"""`BatchingWorker`: turns granted at once, and what is queued gathered into one engine call
whenever the engine is free (see the package's docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from dragoman.engines.workers.calls import (
    Beat,
    CancelToken,
    JobCancelled,
    Priority,
    await_call,
    timed_out,
)
from dragoman.engines.workers.threads import EngineThreads
from dragoman.errors import ClientError, EngineFailure
from dragoman.logs import get_logger, log_failure

log = get_logger(__name__)

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")
T = TypeVar("T")


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


@dataclass(eq=False)  # one request is itself, not an equal one
class _Pending(Generic[RequestT, ResultT]):
    request: RequestT
    key: Hashable
    cancel: CancelToken
    future: asyncio.Future[ResultT]
    priority: int = Priority.STREAMING
    timeout_s: float | None = None
    #: Requests of one such key never run at once (`BatchingWorker`'s `exclusive`); None: any.
    exclusive: Hashable = None

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
    """One engine that can serve many requests per call, and `lanes` calls at once.

    `call` runs in a worker thread and returns one result per request, in order;
    a result that is a `ClientError` fails only its own request. With more than one
    lane, `call` must be safe to run from several threads at once, and `exclusive` may
    name what a request needs alone (an engine of several, `engines.mt.lanes`): a request
    whose key a running call holds waits, and the next ready one runs on the free lane.
    """

    def __init__(
        self,
        call: Callable[[Sequence[RequestT]], Sequence[ResultT | ClientError]],
        *,
        name: str,
        max_batch: int = 16,
        batch_key: Callable[[RequestT], Hashable] | None = None,
        tags: Callable[[RequestT], dict[str, str]] | None = None,
        lanes: int = 1,
        exclusive: Callable[[RequestT], Hashable] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if lanes < 1:
            raise ValueError("lanes must be at least 1")
        self.name = name
        self.max_batch = max_batch
        self.lanes = lanes
        self._call = call
        self._batch_key = batch_key or (lambda request: None)
        self._tags = tags or (lambda request: {})
        self._exclusive = exclusive or (lambda request: None)
        self._queue: list[_Pending[RequestT, ResultT]] = []
        #: The calls running now, each with the requests it carries.
        self._calls: dict[asyncio.Task[None], list[_Pending[RequestT, ResultT]]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._threads = EngineThreads(name, lanes)
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
        leftover = self._queue + [p for batch in self._calls.values() for p in batch]
        self._queue = []
        task, self._task = self._task, None
        tasks = [t for t in (task, *self._calls) if t is not None]
        for running in tasks:
            running.cancel()
        for running in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await running
        self._calls.clear()
        self._threads.close()
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

    async def run(
        self,
        request: RequestT,
        cancel: CancelToken | None = None,
        timeout_s: float | None = None,
        priority: Priority = Priority.STREAMING,
    ) -> ResultT:
        return await self.submit(request, cancel, priority, timeout_s=timeout_s)

    async def submit(
        self,
        request: RequestT,
        cancel: CancelToken | None = None,
        priority: Priority = Priority.STREAMING,
        *,
        timeout_s: float | None = None,
    ) -> ResultT:
        """Serve one request; raises its `ClientError`, `EngineFailure` when the call fails or
        shows no end within `timeout_s`, or `JobCancelled` when `cancel` was set before its
        call started."""
        await self.start()
        try:
            key = self._batch_key(request)
            exclusive = self._exclusive(request)
        except Exception as exc:
            error_id = log_failure(log, f"{self.name} batch key failed", exc, **self._tags(request))
            raise EngineFailure(f"the {self.name} engine failed", error_id=error_id) from exc
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ResultT] = loop.create_future()
        pending = _Pending(request, key, cancel or CancelToken(), future, int(priority), timeout_s, exclusive)
        self._queue.append(pending)

        def withdraw() -> None:
            # Cancelled while it waits, it leaves the queue at once, not when the engine is
            # next free: its session's next job (the step that takes its audio, or a commit's
            # final) can then join the very next call.
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing waits
                loop.call_soon_threadsafe(self._withdraw, pending)

        forget = pending.cancel.on_cancel(withdraw)
        future.add_done_callback(lambda _: forget())
        self._wake.set()
        # A cancelled submitter cancels its future; the worker skips or ignores it.
        return await future

    def _withdraw(self, pending: _Pending[RequestT, ResultT]) -> None:
        """Fail a cancelled request that is still queued; one in a call runs as usual."""
        if pending in self._queue and not pending.future.done():
            self._queue.remove(pending)
            self._n.cancelled += 1
            pending.future.set_exception(JobCancelled("cancelled before it ran"))

    def _take(self) -> list[_Pending[RequestT, ResultT]]:
        """The next call's requests: the oldest live one of the most urgent priority, and those
        that may share its call, most urgent first, then oldest first."""
        live = []
        for pending in self._queue:
            if pending.live:
                live.append(pending)
            elif not pending.future.done():  # cancelled before its call
                self._n.cancelled += 1
                pending.future.set_exception(JobCancelled("cancelled before it ran"))
        live.sort(key=lambda pending: pending.priority)  # stable: arrival order within a priority
        self._queue = live
        held = {p.exclusive for batch in self._calls.values() for p in batch} - {None}
        ready = [p for p in live if p.exclusive not in held]
        if not ready:
            return []
        lead = ready[0]
        # Work running ahead of real time never joins a call led by work at real time or a
        # client's file: it would make that call longer. It has calls of its own, in the gaps,
        # one request each, so that a step at real time that arrives meanwhile waits for one
        # request at most.
        if lead.priority >= Priority.AHEAD:
            self._queue = [p for p in live if p is not lead]
            return [lead]
        # A call led by work a person waits on takes only such work: streaming steps and file
        # windows would make it longer (on a CPU a call costs about the sum of its requests).
        ceiling = Priority.INTERACTIVE if lead.priority == Priority.INTERACTIVE else Priority.BULK
        # Lanes left idle share what is queued, so that one call does not take it all while
        # another lane has nothing to do.
        idle = max(1, self.lanes - len(self._calls))

        def joins(pending: _Pending[RequestT, ResultT]) -> bool:
            return (
                pending.key == lead.key
                and pending.priority <= ceiling
                and pending.exclusive in (None, lead.exclusive)
            )

        size = min(self.max_batch, -(-sum(1 for p in live if joins(p)) // idle))
        batch: list[_Pending[RequestT, ResultT]] = []
        rest: list[_Pending[RequestT, ResultT]] = []
        for pending in live:
            (batch if len(batch) < size and joins(pending) else rest).append(pending)
        self._queue = rest
        return batch

    async def _run(self) -> None:
        while True:
            batch = self._take() if len(self._calls) < self.lanes else []
            if not batch:
                self._wake.clear()
                await self._wake.wait()
                continue
            call = asyncio.get_running_loop().create_task(self._lane(batch), name=f"{self.name}-call")
            self._calls[call] = batch

    async def _lane(self, batch: list[_Pending[RequestT, ResultT]]) -> None:
        try:
            await self._serve(batch)
        finally:
            current = asyncio.current_task()
            if current is not None:
                self._calls.pop(current, None)
            self._wake.set()  # a lane is free

    async def _serve(self, batch: list[_Pending[RequestT, ResultT]]) -> None:
        n = self._n
        n.calls += 1
        n.requests += len(batch)
        n.sizes[len(batch)] += 1
        started = time.perf_counter()
        limits = [p.timeout_s for p in batch]
        timeout_s = None if None in limits else max(t for t in limits if t is not None)
        requests = [p.request for p in batch]
        call = self._threads.run(lambda: self._call(requests))
        try:
            try:
                results = await await_call(call, timeout_s, Beat())
            except TimeoutError:
                # The thread is left to end on its own; the next batch runs beside it.
                self._threads.abandon(call)
                n.failures += 1
                sessions = sorted({self._tags(p.request).get("session", "") for p in batch})
                error = timed_out(self.name, timeout_s, batch=len(batch), sessions=sessions)
                for pending in batch:
                    pending.cancel.cancel()
                    if not pending.future.done():
                        pending.future.set_exception(error)
                return
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
