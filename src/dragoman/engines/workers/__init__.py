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
one. A worker runs one engine in threads of its own, one per lane (`threads.py`), so a
worker's calls overlap only as far as its lanes allow:

- `BatchingWorker` grants turns at once and gathers what is queued into one call
  whenever the engine is free ("each step is an ordinary request, so sessions
  batch on the engine like any other traffic"): oldest first, up to `max_batch`,
  those sharing the oldest one's `batch_key`. While a call runs, new requests
  queue for the next one, so the batch adapts to the load with no timer and no
  added latency when idle. A request may carry a priority: a call is led by the
  most urgent request, and file windows (`BULK`) fill the slots live steps leave;
  a call led by `INTERACTIVE` work (a committed item's final step) carries only such
  work, so it stays short.
- `SerialWorker` grants one turn at a time, highest priority first and in arrival
  order within a priority. A session holds at most one job in flight, so sessions
  of equal priority take turns round-robin and a busy one cannot starve the rest.

A request whose `CancelToken` is set before its call starts is dropped, and a
`BatchingWorker` fails it at once, so what replaces it can join the next call; engines
that stream check the token between tokens or chunks.

A call that hangs is given up after a timeout (`calls.py`).

Both count their calls in `activity.ACTIVITY` while they run, so the embedded LLM can
tell whether any other engine computes beside it (`engines.llama_threads`).

The modules: `calls.py` (what a call carries: priority, cancel token, pieces, the hang
watch), `batching.py`, `serial.py`, `threads.py`, `housekeeping.py`, `activity.py`.
"""

from dragoman.engines.workers.batching import BatchingWorker, WorkerStats
from dragoman.engines.workers.calls import (
    DEFAULT_CALL_TIMEOUT_S,
    CancelToken,
    JobCancelled,
    Priority,
    Streamed,
)
from dragoman.engines.workers.housekeeping import Housekeeping
from dragoman.engines.workers.serial import SerialWorker

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "BatchingWorker",
    "CancelToken",
    "Housekeeping",
    "JobCancelled",
    "Priority",
    "SerialWorker",
    "Streamed",
    "WorkerStats",
]
