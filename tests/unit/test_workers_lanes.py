"""A `BatchingWorker` with several lanes: calls that run at once, sharing what is queued."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from dragoman.engines.workers import BatchingWorker, Priority
from dragoman.errors import EngineFailure


class HeldEngine:
    """Returns each request doubled; a call whose requests include "hold" waits for `release`."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.running = 0
        self.most_at_once = 0
        self.started = threading.Semaphore(0)
        self._lock = threading.Lock()

    async def wait_started(self, calls: int = 1) -> None:
        for _ in range(calls):
            assert await asyncio.to_thread(self.started.acquire, timeout=5)

    def __call__(self, requests: Sequence[str]) -> list[str]:
        with self._lock:
            self.calls.append(list(requests))
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started.release()
        try:
            if "hold" in requests:
                assert self.release.wait(5)
            return [r * 2 for r in requests]
        finally:
            with self._lock:
                self.running -= 1


def worker(engine: HeldEngine, lanes: int, max_batch: int = 16) -> BatchingWorker[str, str]:
    return BatchingWorker(engine, name="test", max_batch=max_batch, lanes=lanes)


async def test_a_second_lane_serves_while_the_first_call_runs() -> None:
    engine = HeldEngine()
    async with worker(engine, lanes=2) as w:
        held = asyncio.ensure_future(w.submit("hold"))
        await engine.wait_started()
        assert await asyncio.wait_for(w.submit("b"), 5) == "bb"
        assert not held.done()
        engine.release.set()
        assert await held == "holdhold"
    assert engine.calls == [["hold"], ["b"]] and engine.most_at_once == 2


async def test_one_lane_runs_one_call_at_a_time() -> None:
    engine = HeldEngine()
    async with worker(engine, lanes=1) as w:
        held = asyncio.ensure_future(w.submit("hold"))
        await engine.wait_started()
        second = asyncio.ensure_future(w.submit("b"))
        await asyncio.sleep(0.1)
        assert not second.done()
        engine.release.set()
        assert await held == "holdhold" and await second == "bb"
    assert engine.most_at_once == 1


async def test_idle_lanes_share_what_is_queued() -> None:
    engine = HeldEngine()
    async with worker(engine, lanes=2) as w:
        results = await asyncio.gather(*(w.submit(c) for c in "abcdef"))
    assert results == ["aa", "bb", "cc", "dd", "ee", "ff"]
    # Six requests queued at once: half for each idle lane, oldest first.
    assert engine.calls == [["a", "b", "c"], ["d", "e", "f"]]


async def test_a_lane_alone_takes_everything_queued() -> None:
    engine = HeldEngine()
    async with worker(engine, lanes=2) as w:
        held = asyncio.ensure_future(w.submit("hold"))
        await engine.wait_started()
        # One lane is busy: the other takes all four, up to max_batch.
        assert await asyncio.gather(*(w.submit(c) for c in "wxyz")) == ["ww", "xx", "yy", "zz"]
        engine.release.set()
        await held
    assert engine.calls == [["hold"], ["w", "x", "y", "z"]]


async def test_interactive_work_takes_a_free_lane() -> None:
    engine = HeldEngine()
    async with worker(engine, lanes=2) as w:
        held = asyncio.ensure_future(w.submit("hold"))
        await engine.wait_started()
        final = w.submit("final", priority=Priority.INTERACTIVE)
        assert await asyncio.wait_for(final, 5) == "finalfinal"
        engine.release.set()
        await held


async def test_close_fails_the_requests_of_every_running_call() -> None:
    engine = HeldEngine()
    w = worker(engine, lanes=2)
    first = asyncio.ensure_future(w.submit("hold"))
    second = asyncio.ensure_future(w.submit("hold"))
    await engine.wait_started(2)
    await w.close()
    engine.release.set()
    for running in (first, second):
        with pytest.raises(EngineFailure):
            await running


def test_lanes_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="lanes"):
        BatchingWorker(HeldEngine(), name="test", lanes=0)


def by_first_letter(request: str) -> str:
    return request[0]


async def test_an_exclusive_key_runs_one_call_at_a_time_and_the_next_ready_one_goes_first() -> None:
    # "h..." requests need what the held call holds; "b" does not, though it came later.
    engine = HeldEngine()
    w = BatchingWorker(engine, name="test", max_batch=1, lanes=2, exclusive=by_first_letter)
    async with w:
        held = asyncio.ensure_future(w.submit("hold"))
        await engine.wait_started()
        same = asyncio.ensure_future(w.submit("h2"))
        await asyncio.sleep(0.05)
        assert await asyncio.wait_for(w.submit("b"), 5) == "bb"
        assert not same.done()  # its key is held: the free lane took "b" instead
        engine.release.set()
        assert await held == "holdhold" and await same == "h2h2"
    assert engine.calls == [["hold"], ["b"], ["h2"]]


async def test_requests_of_one_exclusive_key_never_share_a_call_with_another_key() -> None:
    engine = HeldEngine()
    w = BatchingWorker(engine, name="test", max_batch=4, lanes=1, exclusive=by_first_letter)
    async with w:
        results = await asyncio.gather(*(w.submit(c) for c in ("a1", "b1", "a2", "b2")))
    assert results == ["a1a1", "b1b1", "a2a2", "b2b2"]
    assert all(len({r[0] for r in call}) == 1 for call in engine.calls)
