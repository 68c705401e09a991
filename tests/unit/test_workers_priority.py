"""The batching worker's priorities (file windows, BULK, fill what live steps leave; work a
person waits on runs in short calls of its own) and its queue (a request cancelled while it
waits leaves it at once)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from dragoman.engines.workers import BatchingWorker, CancelToken, JobCancelled, Priority
from dragoman.errors import ClientError


class _Recorder:
    """Echoes its requests; the first call waits for `release`, so others queue behind it."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()

    def __call__(self, requests: Sequence[str]) -> list[str | ClientError]:
        if not self.calls:
            self.release.wait(5)
        self.calls.append(list(requests))
        return list(requests)


async def test_live_steps_lead_each_call_and_bulk_fills_the_rest() -> None:
    engine = _Recorder()
    worker: BatchingWorker[str, str] = BatchingWorker(engine, name="test", max_batch=3)
    async with worker:
        first = asyncio.create_task(worker.submit("warm"))
        await asyncio.sleep(0.05)  # the first call is running: the rest queue behind it
        bulk = [asyncio.create_task(worker.submit(f"file{i}", priority=Priority.BULK)) for i in range(4)]
        await asyncio.sleep(0)
        live = [asyncio.create_task(worker.submit(f"live{i}")) for i in range(2)]
        await asyncio.sleep(0.05)
        engine.release.set()
        results = await asyncio.gather(first, *bulk, *live)
    assert results == ["warm", "file0", "file1", "file2", "file3", "live0", "live1"]
    # Queued first, the file windows still wait for the live steps, and fill the call's slots.
    assert engine.calls == [["warm"], ["live0", "live1", "file0"], ["file1", "file2", "file3"]]


async def test_same_priority_keeps_arrival_order() -> None:
    engine = _Recorder()
    engine.release.set()
    worker: BatchingWorker[str, str] = BatchingWorker(engine, name="test", max_batch=2)
    async with worker:
        done = await asyncio.gather(*(worker.submit(f"w{i}", priority=Priority.BULK) for i in range(3)))
    assert done == ["w0", "w1", "w2"]
    assert [r for call in engine.calls for r in call] == ["w0", "w1", "w2"]


async def test_work_ahead_of_real_time_never_joins_a_live_call() -> None:
    engine = _Recorder()
    worker: BatchingWorker[str, str] = BatchingWorker(engine, name="test", max_batch=4)
    async with worker:
        first = asyncio.create_task(worker.submit("warm"))
        await asyncio.sleep(0.05)
        flood = [asyncio.create_task(worker.submit(f"flood{i}", priority=Priority.AHEAD)) for i in range(3)]
        await asyncio.sleep(0)
        live = asyncio.create_task(worker.submit("live"))
        bulk = asyncio.create_task(worker.submit("file", priority=Priority.BULK))
        await asyncio.sleep(0.05)
        engine.release.set()
        await asyncio.gather(first, *flood, live, bulk)
    # The live step and the file window share a call with room to spare; the flood waits, then
    # gets calls of its own, one request each.
    assert engine.calls == [["warm"], ["live", "file"], ["flood0"], ["flood1"], ["flood2"]]


async def test_a_request_cancelled_while_queued_leaves_at_once() -> None:
    engine = _Recorder()
    worker: BatchingWorker[str, str] = BatchingWorker(engine, name="test", max_batch=4)
    async with worker:
        first = asyncio.create_task(worker.submit("warm"))
        await asyncio.sleep(0.05)  # the engine is busy with "warm"
        token = CancelToken()
        queued = asyncio.create_task(worker.submit("stale", token))
        await asyncio.sleep(0)
        # Cancelled from another thread, as a large append's thread does.
        await asyncio.to_thread(token.cancel)
        # It fails while the engine is still busy, so its session can send what replaces it.
        with pytest.raises(JobCancelled):
            await asyncio.wait_for(queued, 2)
        assert not engine.release.is_set()
        replacement = asyncio.create_task(worker.submit("fresh"))
        engine.release.set()
        assert list(await asyncio.gather(first, replacement)) == ["warm", "fresh"]
    assert engine.calls == [["warm"], ["fresh"]]
    assert worker.stats.cancelled == 1


def test_a_token_forgets_a_callback_it_no_longer_needs() -> None:
    token = CancelToken()
    fired: list[str] = []
    forget = token.on_cancel(lambda: fired.append("gone"))
    token.on_cancel(lambda: fired.append("kept"))
    forget()
    token.cancel()
    token.cancel()  # once only
    assert fired == ["kept"]
    token.on_cancel(lambda: fired.append("late"))  # already set: called at once
    assert fired == ["kept", "late"]


async def test_a_call_led_by_work_a_person_waits_on_takes_only_such_work() -> None:
    engine = _Recorder()
    worker: BatchingWorker[str, str] = BatchingWorker(engine, name="test", max_batch=8)
    async with worker:
        first = asyncio.create_task(worker.submit("warm"))
        await asyncio.sleep(0.05)
        steps = [asyncio.create_task(worker.submit(f"step{i}")) for i in range(3)]
        await asyncio.sleep(0)
        final = asyncio.create_task(worker.submit("final", priority=Priority.INTERACTIVE))
        await asyncio.sleep(0.05)
        engine.release.set()
        await asyncio.gather(first, *steps, final)
    # The final runs first and alone; the streaming steps share the next call.
    assert engine.calls == [["warm"], ["final"], ["step0", "step1", "step2"]]
