"""Audio too far ahead of real time is refused while others are live, and only then."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.engines.workers import SerialWorker
from dragoman.logs import get_logger
from dragoman.sessions.base import AudioFed, CloseCode
from dragoman.transports.driver import SessionDriver
from dragoman.transports.real_time import AHEAD_SLACK_S, RealTimeGuard
from tests.unit.test_driver import Channel, Codec, FedSession


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_session_past_its_burst_is_refused_while_another_is_live() -> None:
    guard = RealTimeGuard(10.0, clock=Clock())
    assert not guard.refuses(1, 0.2)  # live: at real-time pace
    assert not guard.refuses(2, AHEAD_SLACK_S + 1), "ahead, but within its burst"
    assert guard.refuses(2, 25.0)
    assert len(guard) == 1, "a session ahead of real time is not live"


def test_nobody_else_live_means_nothing_refused() -> None:
    clock = Clock()
    guard = RealTimeGuard(10.0, clock=clock)
    assert not guard.refuses(2, 60.0), "alone on the server"
    guard.refuses(1, 0.0)
    clock.now += 6.0  # session 1 went quiet
    assert len(guard) == 0
    assert not guard.refuses(2, 60.0), "the only other session went quiet"
    guard.refuses(1, 0.0)
    assert guard.refuses(2, 60.0)
    guard.leave(1)
    assert not guard.refuses(2, 60.0), "the other session left"


def test_a_session_back_at_real_time_is_live_again_and_protects_the_others() -> None:
    guard = RealTimeGuard(10.0, clock=Clock())
    guard.refuses(1, 0.0)
    assert guard.refuses(2, 30.0)
    assert not guard.refuses(2, 1.0), "real time caught up with it"
    assert guard.refuses(1, 30.0), "now session 1 is the one ahead"


@pytest.mark.parametrize("burst_s", [None, 0.0])
def test_the_guard_can_be_turned_off(burst_s: float | None) -> None:
    guard = RealTimeGuard(burst_s, clock=Clock())
    guard.refuses(1, 0.0)
    assert not guard.refuses(2, 1e6)


async def test_the_driver_tells_a_flood_its_audio_is_refused_and_reads_on() -> None:
    guard = RealTimeGuard(10.0)
    guard.refuses(12345, 0.0)  # a live session at real-time pace
    session = FedSession(600.0)
    assert isinstance(session, AudioFed)
    channel = Channel(["job a", "b", "close"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    run = SessionDriver(session, channel, Codec(), worker, log=get_logger("test"), real_time=guard)
    await asyncio.wait_for(run.run(), 5)
    assert session.refused == [True, True, True], "said before every frame"
    assert "got b" in channel.sent and "result A" in channel.sent, "its frames are still read"
    assert channel.closed == CloseCode.NORMAL
    assert len(guard) == 1, "the flood left the guard; the live session is still counted"


async def test_alone_on_the_server_a_flood_is_taken_as_it_comes() -> None:
    session = FedSession(600.0)
    channel = Channel(["b", "close"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    run = SessionDriver(
        session, channel, Codec(), worker, log=get_logger("test"), real_time=RealTimeGuard(10.0)
    )
    await asyncio.wait_for(run.run(), 5)
    assert session.refused == [False, False]
