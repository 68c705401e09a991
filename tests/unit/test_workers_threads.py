"""Each worker runs its engine calls in threads of its own, as many as its lanes, never in
asyncio's shared default executor (min(32, cores + 4) threads for the whole process)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from dragoman.engines.workers import BatchingWorker, SerialWorker
from dragoman.engines.workers.threads import EngineThreads
from dragoman.errors import EngineFailure

#: More than the default executor has on any machine (32 at most).
MANY_LANES = 40


async def test_every_lane_of_a_remote_engine_is_in_flight_at_once() -> None:
    # A remote engine's calls only wait on its nodes: all `lanes` must wait together. Each
    # call here returns only once every lane has a call waiting beside it.
    everyone = threading.Barrier(MANY_LANES, timeout=10)

    def call(requests: Sequence[int]) -> list[int]:
        everyone.wait()
        return [r + 1 for r in requests]

    async with BatchingWorker(call, name="mt", max_batch=1, lanes=MANY_LANES) as worker:
        results = await asyncio.gather(*(worker.submit(i, timeout_s=30) for i in range(MANY_LANES)))
    assert results == [i + 1 for i in range(MANY_LANES)]


async def test_engine_calls_do_not_queue_behind_the_default_executor() -> None:
    # Whatever else fills asyncio's default executor (a session's large frames, a file's
    # decoding), an engine call has a thread of its own.
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
    gate = threading.Event()
    blocker = asyncio.ensure_future(asyncio.to_thread(gate.wait, 10))
    serial: SerialWorker[str, str] = SerialWorker(lambda s: s.upper(), name="tts")
    try:
        async with serial.turn() as slot:
            assert await asyncio.wait_for(slot.run("hello"), 5) == "HELLO"
        doubling: BatchingWorker[str, str] = BatchingWorker(lambda rs: [r * 2 for r in rs], name="asr")
        async with doubling as batching:
            assert await asyncio.wait_for(batching.submit("ab"), 5) == "abab"
    finally:
        gate.set()
        await blocker
        await serial.close()


async def test_calls_run_in_threads_named_after_their_worker() -> None:
    serial: SerialWorker[None, str] = SerialWorker(lambda _: threading.current_thread().name, name="llm")
    async with serial.turn() as slot:
        name = await slot.run(None)
    await serial.close()
    assert name.startswith("dragoman-llm")


async def test_a_hung_serial_call_leaves_the_next_one_a_fresh_thread() -> None:
    # One thread per serial worker: without a fresh pool, the next call would wait for the
    # hung one to return.
    release = threading.Event()

    def call(request: str) -> str:
        if request == "hang":
            release.wait(10)  # a native call that never looks at its token
        return request

    serial: SerialWorker[str, str] = SerialWorker(call, name="tts")
    try:
        with pytest.raises(EngineFailure):
            async with serial.turn() as slot:
                await slot.run("hang", timeout_s=0.2)
        async with serial.turn() as slot:
            assert await asyncio.wait_for(slot.run("next", timeout_s=5), 5) == "next"
        assert serial.abandoned == 1
    finally:
        release.set()
        await serial.close()


async def test_a_closed_pool_refuses_new_calls() -> None:
    threads = EngineThreads("mt", 1)
    assert await threads.run(lambda: 7) == 7
    threads.close()
    with pytest.raises(RuntimeError):
        await threads.run(lambda: 8)


def test_an_engine_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        EngineThreads("mt", 0)
