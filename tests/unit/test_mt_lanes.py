"""`MTLanes`: MT engines on one model, each session's drafts on the lane it was first given."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from dragoman.engines.info import EngineInfo
from dragoman.engines.mt.base import MTCapabilities, MTDraft, MTEngine, MTRequest
from dragoman.engines.mt.lanes import MAX_AUTO_LANES, MTLanes, auto_lanes
from dragoman.engines.workers import BatchingWorker, CancelToken, SerialWorker, Streamed
from dragoman.transports.services import mt_worker


class Lane(MTEngine):
    """Records the keys it drafted and forgot; a draft waits while `gate` is clear."""

    capabilities = MTCapabilities(attention=True, prompt_context=True, kv_reuse=True, frontier_stop=True)

    def __init__(self, index: int) -> None:
        self.name = "qwen"
        self.index = index
        self.drafted: list[str | None] = []
        self.forgotten: list[str] = []
        self.warmed = self.closed = False
        self.gate = threading.Event()
        self.gate.set()
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def directions(self) -> list[str]:
        return ["en-de"]

    def draft(self, request: MTRequest) -> MTDraft:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            assert self.gate.wait(5)
            self.drafted.append(request.cache_key)
            if request.on_pass is not None:
                request.on_pass(MTDraft(token_ids=[], attention=None, finished=False))
            return MTDraft(token_ids=[self.index], attention=np.zeros((1, 1), np.float32), finished=True)
        finally:
            with self._lock:
                self.running -= 1

    def decode(self, token_ids: Sequence[int]) -> str:
        return f"lane {self.index}"

    def warm_up(self) -> None:
        self.warmed = True

    def describe(self) -> EngineInfo:
        return EngineInfo(name=self.name, backend="qwen-llama", compute_reason="1 thread")

    def forget(self, cache_key: str) -> None:
        self.forgotten.append(cache_key)

    def close(self) -> None:
        self.closed = True


def request(key: str | None) -> MTRequest:
    return MTRequest("en", "de", ["Hello"], cache_key=key)


@pytest.mark.parametrize(
    ("threads", "cores", "lanes"),
    [(1, 2, 2), (2, 2, 1), (0, 2, 2), (4, 16, 4), (1, 64, MAX_AUTO_LANES), (3, 2, 1)],
)
def test_auto_lanes_are_the_shares_that_fit_the_cores(threads: int, cores: int, lanes: int) -> None:
    assert auto_lanes(threads, cores) == lanes


def test_each_session_keeps_its_lane_and_a_new_one_takes_the_least_used() -> None:
    lanes = [Lane(0), Lane(1)]
    engine = MTLanes(lanes)
    assert engine.capabilities.parallel_calls == 2 and engine.name == "qwen"
    for key in ("a", "b", "a", "c", "b"):
        engine.draft(request(key))
    assert lanes[0].drafted == ["a", "a", "c"] and lanes[1].drafted == ["b", "b"]
    engine.forget("b")  # lane 1 is free again: the next session goes there
    assert lanes[1].forgotten == ["b"] and lanes[0].forgotten == []
    engine.draft(request("d"))
    assert lanes[1].drafted[-1] == "d"
    engine.forget("never-drafted")  # nothing to forget anywhere
    assert lanes[0].forgotten == [] and lanes[1].forgotten == ["b"]


def test_a_request_with_no_key_is_bound_to_no_lane() -> None:
    engine = MTLanes([Lane(0), Lane(1)])
    engine.draft(request("a"))
    assert engine.lane_for(request(None)) is None
    assert engine.lane_of(None) == 1  # the least used, and not kept
    assert engine.lane_for(request("a")) == 0


def test_warm_up_describe_and_close_cover_every_lane() -> None:
    lanes = [Lane(0), Lane(1), Lane(2)]
    engine = MTLanes(lanes)
    engine.warm_up()
    assert all(lane.warmed for lane in lanes)
    assert engine.describe().compute_reason == "1 thread, 3 lanes"
    assert engine.directions() == ["en-de"] and engine.decode([5]) == "lane 0"
    engine.close()
    assert all(lane.closed for lane in lanes)


def test_no_lanes_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        MTLanes([])


async def test_the_worker_runs_two_sessions_at_once_and_one_session_in_turn() -> None:
    lanes = [Lane(0), Lane(1)]
    engine = MTLanes(lanes)
    worker = mt_worker(engine)
    assert isinstance(worker, BatchingWorker) and worker.lanes == 2
    for lane in lanes:
        lane.gate.clear()
    try:
        first = asyncio.ensure_future(worker.run(request("a")))
        again = asyncio.ensure_future(worker.run(request("a")))
        other = asyncio.ensure_future(worker.run(request("b")))
        await asyncio.sleep(0.2)
        # "a" is drafting on lane 0 and "b" on lane 1; a's second draft waits for its lane.
        assert lanes[0].running == 1 and lanes[1].running == 1
        for lane in lanes:
            lane.gate.set()
        drafts = await asyncio.wait_for(asyncio.gather(first, again, other), 5)
    finally:
        await worker.close()
    assert [d.token_ids for d in drafts] == [[0], [0], [1]]
    assert lanes[0].most_at_once == 1 and lanes[1].most_at_once == 1


@pytest.mark.parametrize("count", [1, 2])
async def test_a_streaming_call_reaches_its_lane_with_the_pass_callback(count: int) -> None:
    """A streaming MT job's request (`Streamed`) is the engine's `MTRequest.on_pass`, on the
    lane the session's key was given, as a plain request is."""
    lanes = [Lane(i) for i in range(count)]
    engine = MTLanes(lanes)
    worker = mt_worker(engine)
    assert isinstance(worker, BatchingWorker if count > 1 else SerialWorker)
    passes: list[object] = []
    try:
        await worker.run(request("a"))
        drafted = await worker.run(Streamed(request("b"), CancelToken(), passes.append))
    finally:
        await worker.close()
    assert len(passes) == 1 and isinstance(passes[0], MTDraft)
    assert drafted.token_ids == [count - 1] and lanes[count - 1].drafted[-1] == "b"
