"""Audio ahead of real time is read at real time while others are live, and only then."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.engines.workers import SerialWorker
from dragoman.logs import get_logger
from dragoman.sessions.base import CloseCode
from dragoman.transports.driver import SessionDriver
from dragoman.transports.pacing import AHEAD_SLACK_S, AudioPacing
from tests.unit.test_driver import Channel, Codec, FedSession


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ahead_past_its_burst_waits_until_real_time_catches_up() -> None:
    clock = Clock()
    pacing = AudioPacing(10.0, clock=clock)
    assert pacing.wait_s(1, 0.2) == 0.0  # live: at real-time pace
    assert pacing.wait_s(2, AHEAD_SLACK_S + 1) == 0.0, "ahead, but within its burst"
    assert pacing.wait_s(2, 25.0) == pytest.approx(15.0)
    assert len(pacing) == 1, "a session ahead of real time is not live"


def test_nobody_else_live_means_no_pacing() -> None:
    clock = Clock()
    pacing = AudioPacing(10.0, clock=clock)
    assert pacing.wait_s(2, 60.0) == 0.0, "alone on the server"
    pacing.wait_s(1, 0.0)
    clock.now += 6.0  # session 1 went quiet
    assert len(pacing) == 0
    assert pacing.wait_s(2, 60.0) == 0.0, "the only other session went quiet"
    pacing.wait_s(1, 0.0)
    assert pacing.wait_s(2, 60.0) == pytest.approx(50.0)
    pacing.leave(1)
    assert pacing.wait_s(2, 60.0) == 0.0, "the other session left"


def test_a_session_caught_up_counts_as_live_again() -> None:
    pacing = AudioPacing(10.0, clock=Clock())
    pacing.wait_s(1, 0.0)
    assert pacing.wait_s(2, 30.0) > 0
    pacing.wait_s(2, 1.0)
    assert pacing.wait_s(1, 30.0) == pytest.approx(20.0), "session 2 now protects session 1's peers"


@pytest.mark.parametrize("burst_s", [None, 0.0])
def test_pacing_can_be_turned_off(burst_s: float | None) -> None:
    pacing = AudioPacing(burst_s, clock=Clock())
    pacing.wait_s(1, 0.0)
    assert pacing.wait_s(2, 1e6) == 0.0


async def test_the_driver_stops_reading_a_flood_while_another_session_is_live() -> None:
    pacing = AudioPacing(10.0)
    pacing.wait_s(12345, 0.0)  # a live session at real-time pace
    session = FedSession(600.0)
    channel = Channel(["job a", "b"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    run = SessionDriver(session, channel, Codec(), worker, log=get_logger("test"), pacing=pacing)
    task = asyncio.create_task(run.run())
    await asyncio.wait_for(channel.seen("result A"), 5)  # its engine work goes on meanwhile
    await asyncio.sleep(0.3)
    assert "got b" not in channel.sent, "the next frame is left unread"
    run.shut_down()  # a shutdown ends the wait
    await asyncio.wait_for(task, 5)
    assert channel.closed == CloseCode.GOING_AWAY
    assert len(pacing) == 1, "the flood left the pacing, the live session is still counted"


async def test_the_driver_reads_a_flood_at_full_speed_when_nobody_else_is_live() -> None:
    pacing = AudioPacing(10.0)
    session = FedSession(600.0)
    channel = Channel(["job a", "b", "close"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    run = SessionDriver(session, channel, Codec(), worker, log=get_logger("test"), pacing=pacing)
    await asyncio.wait_for(run.run(), 5)
    assert "got b" in channel.sent and channel.closed == CloseCode.NORMAL
