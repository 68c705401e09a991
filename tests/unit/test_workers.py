"""The engine workers (batching, turns, cancellation) with in-test engines that record every call."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable, Sequence

import numpy as np
import pytest

from dragoman.engines.asr.base import ASRCapabilities, ASREngine, PrefixMode, StepRequest, StepResult
from dragoman.engines.workers import BatchingWorker, CancelToken, JobCancelled, Priority, SerialWorker
from dragoman.errors import ClientError, EngineFailure, RequestRejected


class _Tok:
    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


class FakeEngine(ASREngine):
    """Echoes each request's prompt; refuses language "xx"; raises on prompt "boom".

    The first call blocks until `release` is set, so tests can queue requests
    behind a running call the way real traffic does.
    """

    name = "fake"
    capabilities = ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT)
    tokenizer = _Tok()

    def __init__(self, hold_first: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.started = threading.Event()

    def batch_key(self, request: StepRequest) -> Hashable:
        return bool(request.prefix)

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        self.calls.append([r.prompt or "" for r in requests])
        self.started.set()
        self.release.wait(5)
        if any(r.prompt == "boom" for r in requests):
            raise RuntimeError("/secret/path/model.bin: CUDA out of memory")
        out: list[StepResult | ClientError] = []
        for r in requests:
            if r.language == "xx":
                out.append(RequestRejected("language 'xx' is not supported"))
            else:
                out.append(StepResult(text=r.prefix + (r.prompt or ""), language=r.language))
        return out


def asr_worker(engine: FakeEngine, max_batch: int = 16) -> BatchingWorker[StepRequest, StepResult]:
    return BatchingWorker(
        engine.transcribe_batch, name="asr", max_batch=max_batch, batch_key=engine.batch_key
    )


def _req(name: str, *, prefix: str = "", language: str | None = "en") -> StepRequest:
    return StepRequest(np.zeros(1600, np.float32), prefix=prefix, language=language, prompt=name)


async def _wait_started(engine: FakeEngine) -> None:
    assert await asyncio.to_thread(engine.started.wait, 5)


async def test_queued_requests_share_one_call() -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine, max_batch=16) as sched:
        first = asyncio.create_task(sched.submit(_req("a")))
        await _wait_started(engine)
        rest = [asyncio.create_task(sched.submit(_req(n))) for n in "bcdef"]
        await asyncio.sleep(0.05)
        engine.release.set()
        results = await asyncio.gather(first, *rest)
    assert [r.text for r in results] == list("abcdef")
    assert engine.calls == [["a"], ["b", "c", "d", "e", "f"]]
    stats = sched.stats
    assert stats.calls == 2 and stats.requests == 6 and stats.batch_sizes == {1: 1, 5: 1}


async def test_max_batch_and_batch_key_split_calls() -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine, max_batch=2) as sched:
        first = asyncio.create_task(sched.submit(_req("a")))
        await _wait_started(engine)
        rest = [
            asyncio.create_task(sched.submit(_req("b"))),
            asyncio.create_task(sched.submit(_req("p", prefix="x"))),
            asyncio.create_task(sched.submit(_req("c"))),
            asyncio.create_task(sched.submit(_req("d"))),
        ]
        await asyncio.sleep(0.05)
        engine.release.set()
        await asyncio.gather(first, *rest)
    # Oldest first; the prefixed request may not join the unprefixed ones' call.
    assert engine.calls == [["a"], ["b", "c"], ["p"], ["d"]]


async def test_client_error_stays_in_its_slot() -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine) as sched:
        first = asyncio.create_task(sched.submit(_req("a")))
        await _wait_started(engine)
        good = asyncio.create_task(sched.submit(_req("b")))
        bad = asyncio.create_task(sched.submit(_req("c", language="xx")))
        await asyncio.sleep(0.05)
        engine.release.set()
        assert (await first).text == "a"
        assert (await good).text == "b"
        with pytest.raises(RequestRejected, match="'xx' is not supported"):
            await bad
    assert engine.calls[1] == ["b", "c"]


async def test_failed_call_is_engine_failure_with_error_id_for_the_culprit_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine) as sched:
        first = asyncio.create_task(sched.submit(_req("a")))
        await _wait_started(engine)
        batched = [asyncio.create_task(sched.submit(_req(n))) for n in ("b", "boom")]
        await asyncio.sleep(0.05)
        engine.release.set()
        await first
        good, bad = await asyncio.gather(*batched, return_exceptions=True)
        # The worker survives a failed call.
        assert (await sched.submit(_req("after"))).text == "after"
    # The batch failed, so each request was tried alone: the good one still gets its result.
    assert not isinstance(good, BaseException) and good.text == "b"
    assert engine.calls[1:4] == [["b", "boom"], ["b"], ["boom"]]
    assert isinstance(bad, EngineFailure) and bad.error_id.startswith("err_")
    assert "secret" not in bad.public_message and "CUDA" not in bad.public_message
    assert sched.stats.failures == 2


async def test_no_batching_serves_one_per_call() -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine, max_batch=1) as sched:
        first = asyncio.create_task(sched.submit(_req("a")))
        await _wait_started(engine)
        rest = [asyncio.create_task(sched.submit(_req(n))) for n in "bcd"]
        await asyncio.sleep(0.05)
        engine.release.set()
        await asyncio.gather(first, *rest)
    assert engine.calls == [["a"], ["b"], ["c"], ["d"]]
    assert sched.stats.batch_sizes == {1: 4}


async def test_cancelled_submitters_do_not_break_the_worker() -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine) as sched:
        running = asyncio.create_task(sched.submit(_req("a")))
        await _wait_started(engine)
        queued = asyncio.create_task(sched.submit(_req("queued")))
        kept = asyncio.create_task(sched.submit(_req("kept")))
        await asyncio.sleep(0.05)
        running.cancel()  # its call is in flight
        queued.cancel()  # it never reaches a call
        await asyncio.gather(running, queued, return_exceptions=True)
        engine.release.set()
        assert (await kept).text == "kept"
        assert (await sched.submit(_req("later"))).text == "later"
    assert running.cancelled() and queued.cancelled()
    assert engine.calls == [["a"], ["kept"], ["later"]]


async def test_close_fails_waiting_steps_and_refuses_new_ones() -> None:
    engine = FakeEngine(hold_first=True)
    sched = asr_worker(engine)
    running = asyncio.create_task(sched.submit(_req("a")))
    await _wait_started(engine)
    waiting = asyncio.create_task(sched.submit(_req("b")))
    await asyncio.sleep(0.05)
    await sched.close()
    engine.release.set()
    for task in (running, waiting):
        with pytest.raises(EngineFailure):
            await task
    with pytest.raises(EngineFailure):
        await sched.submit(_req("c"))


async def test_sessions_run_concurrently_without_a_lock() -> None:
    """Many sessions submitting at once are served in far fewer calls than steps."""
    engine = FakeEngine()
    async with asr_worker(engine, max_batch=8) as sched:

        async def session(n: int) -> list[str]:
            return [(await sched.submit(_req(f"{n}-{i}"))).text for i in range(5)]

        done = await asyncio.gather(*(session(n) for n in range(8)))
    assert done == [[f"{n}-{i}" for i in range(5)] for n in range(8)]
    assert sched.stats.requests == 40 and sched.stats.calls < 40


async def test_a_request_cancelled_before_its_call_is_dropped() -> None:
    engine = FakeEngine(hold_first=True)
    async with asr_worker(engine) as worker:
        running = asyncio.create_task(worker.submit(_req("a")))
        await asyncio.to_thread(engine.started.wait, 5)
        token = CancelToken()
        dropped = asyncio.create_task(worker.submit(_req("dropped"), token))
        kept = asyncio.create_task(worker.submit(_req("kept")))
        await asyncio.sleep(0)
        token.cancel()
        engine.release.set()
        assert (await running).text == "a" and (await kept).text == "kept"
        with pytest.raises(JobCancelled):
            await dropped
    assert engine.calls == [["a"], ["kept"]]
    assert worker.stats.cancelled == 1


async def test_serial_turns_go_by_priority_then_arrival() -> None:
    order: list[str] = []
    gate = asyncio.Event()
    worker: SerialWorker[str, str] = SerialWorker(lambda request: request.upper(), name="mt")

    async def session(name: str, priority: Priority) -> None:
        async with worker.turn(priority) as slot:
            order.append(name)
            if name == "first":
                await gate.wait()  # holds the engine while the others queue
            assert await slot.run(name) == name.upper()

    first = asyncio.create_task(session("first", Priority.INTERACTIVE))
    await asyncio.sleep(0)
    others = [
        asyncio.create_task(session(name, priority))
        for name, priority in [
            ("background", Priority.BACKGROUND),
            ("stream-1", Priority.STREAMING),
            ("interactive", Priority.INTERACTIVE),
            ("stream-2", Priority.STREAMING),
        ]
    ]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, *others)
    assert order == ["first", "interactive", "stream-1", "stream-2", "background"]
    assert worker.calls == 5


async def test_a_serial_turn_abandoned_while_waiting_passes_the_engine_on() -> None:
    worker: SerialWorker[str, str] = SerialWorker(lambda request: request, name="mt")
    gate = asyncio.Event()
    served: list[str] = []

    async def hold() -> None:
        async with worker.turn():
            await gate.wait()

    async def take(name: str) -> None:
        async with worker.turn() as slot:
            served.append(await slot.run(name))

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    gone = asyncio.create_task(take("gone"))
    after = asyncio.create_task(take("after"))
    await asyncio.sleep(0)
    gone.cancel()
    gate.set()
    await asyncio.gather(holder, after)
    assert served == ["after"]


async def test_a_cancelled_serial_job_never_reaches_the_engine() -> None:
    calls: list[str] = []

    def engine(request: str) -> str:
        calls.append(request)
        return request

    worker: SerialWorker[str, str] = SerialWorker(engine, name="mt")
    token = CancelToken()
    token.cancel()
    async with worker.turn() as slot:
        with pytest.raises(JobCancelled):
            await slot.run("stale", token)
    assert calls == [] and worker.cancelled == 1


async def test_closing_a_serial_worker_fails_the_waiting_turns() -> None:
    worker: SerialWorker[str, str] = SerialWorker(lambda request: request, name="mt")
    gate = asyncio.Event()

    async def hold() -> None:
        async with worker.turn():
            await gate.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)

    async def wait_turn() -> None:
        async with worker.turn():
            pass

    waiting = asyncio.create_task(wait_turn())
    await asyncio.sleep(0)
    await worker.close()
    with pytest.raises(EngineFailure):
        await waiting
    gate.set()
    await holder


async def test_a_hung_batch_fails_its_requests_with_an_error_id_and_the_next_batch_is_served() -> None:
    release = threading.Event()

    def call(requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        if any(r.prompt == "hang" for r in requests):
            release.wait(10)  # a native call that never looks at its token
        return [StepResult(text=r.prompt or "", language="en") for r in requests]

    token = CancelToken()
    async with BatchingWorker(call, name="asr") as sched:
        with pytest.raises(EngineFailure) as failed:
            await sched.submit(_req("hang"), token, timeout_s=0.2)
        # The hung call's thread still runs; the worker does not wait for it.
        assert (await sched.submit(_req("next"), timeout_s=5)).text == "next"
        release.set()
    assert failed.value.error_id.startswith("err_") and token.cancelled
    assert "hang" not in failed.value.public_message
    assert sched.stats.failures == 1
