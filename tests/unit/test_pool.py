"""The pipeline pool: a bounded set of units, and quarantine for one that did not drain."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.transports.pool import PipelinePool


def test_the_pool_bounds_sessions_and_reuses_drained_units() -> None:
    pool = PipelinePool(2)
    first, second = pool.acquire("s1"), pool.acquire("s2")
    assert first is not None and second is not None
    assert pool.acquire("s3") is None, "past the limit"
    pool.release(first, drained=True)
    again = pool.acquire("s3")
    assert again is first and again.session_id == "s3" and again.served == 2


def test_a_unit_that_did_not_drain_is_quarantined_and_never_reused() -> None:
    pool = PipelinePool(1)
    unit = pool.acquire("s1")
    assert unit is not None
    pool.release(unit, drained=False)
    snapshot = pool.snapshot()
    assert snapshot["quarantined"] == 1 and snapshot["idle"] == 0
    assert snapshot["units"][0]["state"] == "quarantined" and snapshot["units"][0]["reason"]
    assert pool.acquire("s2") is None


def test_releasing_a_unit_twice_is_a_bug() -> None:
    pool = PipelinePool(1)
    unit = pool.acquire("s1")
    assert unit is not None
    pool.release(unit, drained=True)
    with pytest.raises(RuntimeError):
        pool.release(unit, drained=True)


async def test_admission_waits_briefly_for_a_unit_being_released() -> None:
    """A client that closes and at once reconnects is not refused by its own old session."""
    pool = PipelinePool(1)
    unit = pool.acquire("sess_old")
    assert unit is not None
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, pool.release, unit, True)
    again = await pool.acquire_within("sess_new", seconds=2.0)
    assert again is unit and again.session_id == "sess_new"


async def test_admission_gives_up_when_nothing_is_released_in_time() -> None:
    pool = PipelinePool(1)
    assert pool.acquire("sess_busy") is not None
    assert await pool.acquire_within("sess_new", seconds=0.05) is None


async def test_admission_does_not_wait_when_every_other_unit_is_quarantined() -> None:
    pool = PipelinePool(1)
    unit = pool.acquire("sess_stuck")
    assert unit is not None
    pool.release(unit, drained=False)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await pool.acquire_within("sess_new", seconds=5.0) is None
    assert loop.time() - started < 1.0
