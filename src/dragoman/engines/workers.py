"""One queue in front of the ASR engine, so every session's steps batch like ordinary traffic.

The seed: "Each step is an ordinary request, so sessions batch on the engine like any
other traffic." Sessions never call the engine themselves and never hold a lock
around it; they `submit` a step and await its result. A single worker runs the
engine in a thread and, whenever it is free, takes every queued request (oldest
first, up to `max_batch`, those sharing the oldest one's `batch_key`) into one
`transcribe_batch` call. While that call runs, new steps queue up for the next one,
so the batch size adapts to the load with no timer and no added latency when idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.errors import ClientError, EngineFailure
from dragoman.logs import get_logger, log_failure

log = get_logger(__name__)


@dataclass(frozen=True)
class SchedulerStats:
    #: `transcribe_batch` calls made (failed ones included).
    calls: int
    #: Requests those calls carried.
    requests: int
    #: Calls that raised (each of their requests got an EngineFailure).
    failures: int
    #: Batch size -> number of calls of that size.
    batch_sizes: dict[int, int]
    #: Requests waiting for a call now.
    queued: int

    @property
    def mean_batch(self) -> float:
        return self.requests / self.calls if self.calls else 0.0


@dataclass
class _Pending:
    request: StepRequest
    key: Hashable
    future: asyncio.Future[StepResult]


class StepScheduler:
    """Serve `StepRequest`s through one engine, batching whatever is queued when it is free."""

    def __init__(self, engine: ASREngine, max_batch: int = 16, batching: bool = True) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.engine = engine
        #: batching=False serves one request per call (the serialized baseline for benchmarks).
        self.max_batch = max_batch if batching else 1
        self.batching = batching
        self._queue: list[_Pending] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._in_flight: list[_Pending] = []
        self._closed = False
        self._calls = 0
        self._requests = 0
        self._failures = 0
        self._sizes: Counter[int] = Counter()

    @property
    def stats(self) -> SchedulerStats:
        return SchedulerStats(
            calls=self._calls,
            requests=self._requests,
            failures=self._failures,
            batch_sizes=dict(sorted(self._sizes.items())),
            queued=sum(1 for p in self._queue if not p.future.done()),
        )

    async def start(self) -> None:
        """Start the worker (`submit` does it on first use)."""
        if self._closed:
            raise EngineFailure("the ASR scheduler is closed")
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="asr-step-scheduler")

    async def close(self) -> None:
        """Stop taking steps; waiting and running ones fail with `EngineFailure`."""
        self._closed = True
        leftover = self._queue + self._in_flight
        self._queue = []
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        for pending in leftover:
            if not pending.future.done():
                pending.future.set_exception(EngineFailure("the ASR scheduler closed before the step ran"))

    async def __aenter__(self) -> StepScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def submit(self, request: StepRequest) -> StepResult:
        """Run one step; raises the step's `ClientError`, or `EngineFailure` when the call fails."""
        await self.start()
        try:
            key = self.engine.batch_key(request)
        except Exception as exc:
            error_id = log_failure(log, "asr batch key failed", exc, **request.tags)
            raise EngineFailure("the ASR engine failed", error_id=error_id) from exc
        future: asyncio.Future[StepResult] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(request, key, future))
        self._wake.set()
        # A cancelled submitter cancels its future; the worker skips or ignores it.
        return await future

    def _take(self) -> list[_Pending]:
        """The next call's requests: the oldest live one and those that may share its call."""
        self._queue = [p for p in self._queue if not p.future.done()]
        if not self._queue:
            return []
        key = self._queue[0].key
        batch: list[_Pending] = []
        rest: list[_Pending] = []
        for pending in self._queue:
            if len(batch) < self.max_batch and pending.key == key:
                batch.append(pending)
            else:
                rest.append(pending)
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

    async def _serve(self, batch: list[_Pending]) -> None:
        requests = [p.request for p in batch]
        self._calls += 1
        self._requests += len(batch)
        self._sizes[len(batch)] += 1
        started = time.perf_counter()
        try:
            results = await asyncio.to_thread(self.engine.transcribe_batch, requests)
            if len(results) != len(batch):
                raise RuntimeError(f"engine returned {len(results)} results for {len(batch)} requests")
        except Exception as exc:
            self._failures += 1
            error_id = log_failure(
                log,
                "asr engine call failed",
                exc,
                batch=len(batch),
                sessions=sorted({p.request.tags.get("session", "") for p in batch}),
            )
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(EngineFailure("the ASR engine failed", error_id=error_id))
            return
        log.debug("asr call", batch=len(batch), seconds=round(time.perf_counter() - started, 3))
        for pending, result in zip(batch, results, strict=True):
            if pending.future.done():
                continue  # its submitter went away
            if isinstance(result, ClientError):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)
