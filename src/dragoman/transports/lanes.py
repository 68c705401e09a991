"""A session's lanes, one per engine it uses, and one job's call on a lane's worker.

The driver (`driver.py`) runs a job loop per lane; each job takes a turn on the lane's worker
(`engines/workers/`) at the lane's priority, then makes one call in it. What the call ends
in is what the session is given: the result, or a `DragomanError` (an unexpected engine fault
becomes an `EngineFailure` under an error id).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Protocol

from dragoman.engines.workers import CancelToken, Priority
from dragoman.errors import ClientError, EngineFailure, ServerError
from dragoman.logs import log_failure
from dragoman.metrics import ENGINE_JOB_SECONDS
from dragoman.sessions.base import Job


class Slot(Protocol):
    async def run(
        self,
        request: Any,
        cancel: CancelToken | None = None,
        timeout_s: float | None = None,
        priority: Priority = Priority.STREAMING,
    ) -> Any: ...


class Worker(Protocol):
    """An engine worker (`engines/workers/`): a turn on the engine, then a call in it."""

    def turn(self, priority: Priority) -> contextlib.AbstractAsyncContextManager[Slot]: ...


@dataclass(frozen=True)
class Lane:
    """One engine a session uses: its worker, and the priority its jobs take turns at."""

    worker: Worker
    priority: Priority


async def call_engine(
    slot: Slot,
    lane: str,
    job: Job,
    request: Any,
    *,
    timeout_s: float | None,
    priority: Priority,
    log: Any,
) -> Any:
    """Run `job`'s `request` in `slot`: its result, or the `DragomanError` it failed with."""
    began = time.perf_counter()
    try:
        outcome: Any = await slot.run(request, job.cancel, timeout_s=timeout_s, priority=priority)
    except asyncio.CancelledError:
        raise
    except (ClientError, ServerError) as exc:
        outcome = exc
    except Exception as exc:
        error_id = log_failure(log, "engine job failed", exc)
        outcome = EngineFailure("the engine job failed", error_id=error_id)
    seconds = time.perf_counter() - began
    ENGINE_JOB_SECONDS.labels(lane).observe(seconds)
    ms = round(seconds * 1000)
    log.debug("engine job", lane=lane, job=type(job).__name__, ms=ms, failed=isinstance(outcome, Exception))
    return outcome
