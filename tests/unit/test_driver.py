"""The one session driver with an in-test session, channel and codec: order, jobs, faults, close."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

import pytest

from dragoman.engines.workers import CancelToken, Priority, SerialWorker
from dragoman.errors import ClientError, DragomanError, InvalidEvent, MessageTooBig, ServerError
from dragoman.logs import get_logger
from dragoman.sessions.base import CloseCode
from dragoman.transports.driver import Frame, SendQueue, SessionDriver


@dataclass(frozen=True)
class EchoJob:
    request: str
    cancel: CancelToken = field(default_factory=CancelToken)
    priority: Priority = Priority.INTERACTIVE


class EchoSession:
    """ "job X" asks the engine to upper-case X; "close" ends the session; "boom" is a bug."""

    session_id = "test"

    def __init__(self) -> None:
        self.out: list[str] = ["hello"]
        self.pending: list[str] = []
        self.in_flight: EchoJob | None = None
        self._close: int | None = None

    def receive(self, event: str) -> None:
        if event == "boom":
            raise RuntimeError("/srv/secret: session bug")
        if event == "close":
            self.out.append("bye")
            self._close = CloseCode.NORMAL
        elif event.startswith("job "):
            self.pending.append(event[4:])
        else:
            self.out.append(f"got {event}")

    def events_to_send(self) -> list[str]:
        out, self.out = self.out, []
        return out

    def next_job(self, lane: str = "engine") -> EchoJob | None:
        if self.in_flight is not None or not self.pending:
            return None
        self.in_flight = EchoJob(self.pending.pop(0))
        return self.in_flight

    def job_done(self, job: EchoJob, result: str) -> None:
        self.in_flight = None
        self.out.append(f"result {result}")

    def job_failed(self, job: EchoJob, error: DragomanError) -> None:
        self.in_flight = None
        self.out.append(f"failed {error.code}")

    @property
    def close_code(self) -> int | None:
        return self._close


class Codec:
    def parse(self, frame: Frame) -> str:
        if isinstance(frame, bytes):
            raise InvalidEvent("text frames only")
        return frame

    def write(self, event: str) -> str:
        return event

    def refusal(self, error: ClientError, frame: Frame) -> str:
        return f"refused {error.code}"

    def failure(self, error: ServerError, event: str | None) -> str:
        return f"server error {error.error_id} on {event}"


class Channel:
    def __init__(self, frames: list[Frame | None]) -> None:
        self.incoming: asyncio.Queue[Frame | None] = asyncio.Queue()
        for frame in frames:
            self.incoming.put_nowait(frame)
        self.sent: list[str] = []
        self._sent = asyncio.Event()
        self.closed: int | None = None

    async def receive(self) -> Frame | None:
        return await self.incoming.get()

    async def send(self, frame: str) -> None:
        self.sent.append(frame)
        self._sent.set()

    async def seen(self, frame: str) -> None:
        while frame not in self.sent:
            self._sent.clear()
            await self._sent.wait()

    async def close(self, code: int) -> None:
        self.closed = code


def driver(session: EchoSession, channel: Channel, worker: SerialWorker[str, str]) -> SessionDriver:  # type: ignore[type-arg]
    return SessionDriver(
        session, channel, Codec(), worker, log=get_logger("test"), priority=Priority.INTERACTIVE
    )


async def test_events_jobs_and_the_session_close_go_out_in_order() -> None:
    session = EchoSession()
    channel = Channel(["a", "job x", "b"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    task = asyncio.create_task(driver(session, channel, worker).run())
    await asyncio.wait_for(channel.seen("result X"), 5)
    channel.incoming.put_nowait("close")
    await asyncio.wait_for(task, 5)
    assert channel.sent[:2] == ["hello", "got a"]
    # The job's result and the next event race; both come before the close, once.
    assert sorted(channel.sent[2:4]) == ["got b", "result X"]
    assert channel.sent[4:] == ["bye"] and channel.closed == CloseCode.NORMAL


async def test_a_refused_frame_and_a_session_bug_are_reported_and_the_session_goes_on() -> None:
    session = EchoSession()
    channel = Channel([b"\x00", "boom", "after", "close"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    await asyncio.wait_for(driver(session, channel, worker).run(), 5)
    assert channel.sent[0] == "hello" and channel.sent[1] == "refused invalid_event"
    assert channel.sent[2].startswith("server error err_") and channel.sent[2].endswith("on boom")
    assert "secret" not in channel.sent[2]
    assert channel.sent[3:] == ["got after", "bye"]


async def test_a_peer_that_goes_away_cancels_the_job_in_flight_and_waits_for_it() -> None:
    started = threading.Event()
    session = EchoSession()

    def slow(request: str) -> str:
        # An engine that checks its job's token between tokens.
        started.set()
        while not (session.in_flight is not None and session.in_flight.cancel.cancelled):
            time.sleep(0.01)
        return request

    channel = Channel(["job slow"])
    worker: SerialWorker[str, str] = SerialWorker(slow, name="echo")
    run = driver(session, channel, worker)
    task = asyncio.create_task(run.run())
    await asyncio.to_thread(started.wait, 5)
    job = session.in_flight
    assert job is not None
    channel.incoming.put_nowait(None)  # the client closed
    await asyncio.wait_for(task, 5)
    assert job.cancel.cancelled and channel.closed is None
    assert run.drained, "the engine call ended before the driver did"
    assert not worker._busy, "and the engine is free for the next caller"


async def test_an_engine_call_that_does_not_stop_leaves_the_session_undrained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("dragoman.transports.driver.DRAIN_TIMEOUT_S", 0.2)
    release, started = threading.Event(), threading.Event()

    def stuck(request: str) -> str:
        started.set()
        release.wait(5)  # ignores its token
        return request

    session = EchoSession()
    channel = Channel(["job stuck"])
    run = driver(session, channel, SerialWorker(stuck, name="echo"))
    task = asyncio.create_task(run.run())
    await asyncio.to_thread(started.wait, 5)
    channel.incoming.put_nowait(None)
    await asyncio.wait_for(task, 5)
    release.set()
    assert not run.drained


async def test_the_send_queue_is_bounded_and_drops_unsent_frames_by_tag() -> None:
    queue = SendQueue(limit=3)
    assert queue.put("created") and queue.put("audio-1", "audio") and queue.put("audio-2", "audio")
    assert not queue.put("one too many") and queue.overflowed  # a client that does not read
    assert queue.clear("audio") == 2  # a barge-in: unsent audio goes, the rest stays
    assert queue.put("done")
    queue.close()
    assert [await queue.get(), await queue.get(), await queue.get()] == ["created", "done", None]


@pytest.mark.parametrize("limit", [1, 2])
async def test_a_client_that_reads_nothing_is_closed(limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import dragoman.transports.driver as driver_module

    monkeypatch.setattr(driver_module, "DRAIN_TIMEOUT_S", 0.2)

    class Stuck(Channel):
        async def send(self, frame: str) -> None:
            await asyncio.Event().wait()  # a peer whose receive window never opens

    session = EchoSession()
    channel = Stuck(["a", "b", "c", "d"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    run = SessionDriver(
        session,
        channel,
        Codec(),
        worker,
        log=get_logger("test"),
        priority=Priority.INTERACTIVE,
        send_limit=limit,
    ).run()
    await asyncio.wait_for(run, 5)
    assert channel.closed == CloseCode.POLICY_VIOLATION


class OversizeChannel(Channel):
    """Says its next frame is past its size limit, as WebSocketChannel does."""

    async def receive(self) -> Frame | None:
        frame = await self.incoming.get()
        if frame == "huge":
            raise MessageTooBig("too big")
        return frame


async def test_an_oversized_message_is_an_error_event_then_a_1009_close() -> None:
    channel = OversizeChannel(["a", "huge", "never read"])
    await asyncio.wait_for(driver(EchoSession(), channel, SerialWorker(str.upper, name="echo")).run(), 5)
    assert channel.sent[-1] == "refused message_too_big"
    assert channel.closed == CloseCode.MESSAGE_TOO_BIG


async def test_a_client_that_sends_nothing_is_closed_after_the_idle_timeout() -> None:
    channel = Channel(["a"])
    run = SessionDriver(
        EchoSession(),
        channel,
        Codec(),
        SerialWorker(str.upper, name="echo"),
        log=get_logger("test"),
        idle_timeout_s=0.2,
    )
    await asyncio.wait_for(run.run(), 5)
    assert channel.sent == ["hello", "got a", "refused idle_timeout"]
    assert channel.closed == CloseCode.NORMAL


async def test_shut_down_tells_the_client_why_and_closes_with_1001() -> None:
    channel = Channel(["a"])
    run = driver(EchoSession(), channel, SerialWorker(str.upper, name="echo"))
    task = asyncio.create_task(run.run())
    await asyncio.wait_for(channel.seen("got a"), 5)
    run.shut_down()
    await asyncio.wait_for(task, 5)
    assert channel.sent[-1].startswith("server error") and channel.closed == CloseCode.GOING_AWAY


class DeafChannel(Channel):
    """A client that never reads: every send blocks."""

    async def send(self, frame: str) -> None:
        await asyncio.Event().wait()


async def test_a_client_that_never_reads_is_closed_without_sending_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("dragoman.transports.driver.DRAIN_TIMEOUT_S", 0.2)
    session = EchoSession()
    channel = DeafChannel([])
    run = SessionDriver(
        session, channel, Codec(), SerialWorker(str.upper, name="echo"), log=get_logger("test"), send_limit=5
    )
    task = asyncio.create_task(run.run())
    await asyncio.sleep(0)
    session.out += [f"event {n}" for n in range(20)]
    run._flush()  # the session says more than the client takes
    await asyncio.wait_for(task, 5)
    assert channel.closed == CloseCode.POLICY_VIOLATION
    assert len(run.outgoing) <= 5, "nothing buffered past the bound"


async def test_a_client_waiting_on_a_slow_job_is_not_idle() -> None:
    def slow(request: str) -> str:
        time.sleep(0.6)  # longer than the idle timeout
        return request.upper()

    channel = Channel(["job slow"])
    run = SessionDriver(
        EchoSession(),
        channel,
        Codec(),
        SerialWorker(slow, name="echo"),
        log=get_logger("test"),
        idle_timeout_s=0.2,
    )
    await asyncio.wait_for(run.run(), 5)
    assert channel.sent[:2] == ["hello", "result SLOW"], "the answer it waited for came first"
    assert channel.sent[-1] == "refused idle_timeout" and channel.closed == CloseCode.NORMAL
