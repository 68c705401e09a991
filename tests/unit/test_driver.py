"""The one session driver with an in-test session, channel and codec: order, jobs, faults, close."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from dragoman.engines.workers import CancelToken, Priority, SerialWorker, Streamed
from dragoman.errors import ClientError, DragomanError, InvalidEvent, MessageTooBig, ServerError
from dragoman.logs import get_logger
from dragoman.sessions.base import CloseCode
from dragoman.transports.adapters import Frame
from dragoman.transports.connections import Connections
from dragoman.transports.driver import OFFLOAD_BYTES, SessionDriver
from dragoman.transports.lanes import Lane
from dragoman.transports.send_queue import SendQueue


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
    run.outbox.flush()  # the session says more than the client takes
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


# -- faults: a hung engine, a heavy frame, clients that go away -----------------------------


class RecordingSession(EchoSession):
    """Keeps the errors its jobs failed with."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[DragomanError] = []

    def job_failed(self, job: EchoJob, error: DragomanError) -> None:
        self.errors.append(error)
        super().job_failed(job, error)


async def test_a_hung_engine_call_fails_its_session_with_an_error_id_and_the_engine_serves_the_next() -> None:
    release = threading.Event()

    def engine(request: str) -> str:
        if request == "hang":
            release.wait(10)  # ignores its token, as a stuck native call does
        return request.upper()

    worker: SerialWorker[str, str] = SerialWorker(engine, name="echo")
    hung, other = RecordingSession(), RecordingSession()
    hung_channel, other_channel = Channel(["job hang"]), Channel([])

    def run(session: EchoSession, channel: Channel) -> SessionDriver:  # type: ignore[type-arg]
        return SessionDriver(session, channel, Codec(), worker, log=get_logger("test"), engine_timeout_s=0.3)

    tasks = [
        asyncio.create_task(run(hung, hung_channel).run()),
        asyncio.create_task(run(other, other_channel).run()),
    ]
    await asyncio.wait_for(hung_channel.seen("failed engine_failure"), 5)
    (error,) = hung.errors
    assert isinstance(error, ServerError) and error.error_id.startswith("err_")
    assert error.error_id in error.public_message and "hang" not in error.public_message
    # The engine is not lost to the hung call: the other session and the same one are served.
    other_channel.incoming.put_nowait("job b")
    hung_channel.incoming.put_nowait("job again")
    await asyncio.wait_for(other_channel.seen("result B"), 5)
    await asyncio.wait_for(hung_channel.seen("result AGAIN"), 5)
    assert worker.abandoned == 1 and not other.errors
    release.set()
    for channel in (hung_channel, other_channel):
        channel.incoming.put_nowait("close")
    await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def test_a_streaming_call_that_keeps_making_pieces_is_not_hung() -> None:
    pieces = 8

    def engine(request: Streamed[str]) -> str:
        for n in range(pieces):
            time.sleep(0.05)  # 0.4 s in all, past the 0.2 s timeout, but never 0.2 s without a piece
            request.emit(n)
        return request.request

    seen: list[object] = []
    worker: SerialWorker[Streamed[str], str] = SerialWorker(engine, name="stream")
    async with worker.turn() as slot:
        result = await slot.run(Streamed("done", CancelToken(), seen.append), timeout_s=0.2)
    assert result == "done" and seen == list(range(pieces))


class HeavySession(EchoSession):
    """Taking a "big ..." event blocks its thread until `release` is set (as decoding, resampling
    and VAD of a huge append would hold the loop): whether it was set before `wait` gave up
    tells whether anything else ran meanwhile."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release
        self.released: bool | None = None

    def receive(self, event: str) -> None:
        if event.startswith("big"):
            self.released = self.release.wait(10)
            self.out.append("took big")
            return
        super().receive(event)


async def test_a_huge_frame_is_taken_off_the_loop_while_other_sessions_are_answered() -> None:
    release = threading.Event()
    heavy = HeavySession(release)
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    huge = "big " + "x" * OFFLOAD_BYTES
    heavy_channel, light_channel = Channel(["job first", huge, "after"]), Channel([])
    runs = [
        asyncio.create_task(driver(heavy, heavy_channel, worker).run()),
        asyncio.create_task(driver(EchoSession(), light_channel, worker).run()),
    ]
    # While the heavy session's frame is being taken, the light session's requests and jobs are
    # all answered (on the loop this would wait for the heavy frame: released would be False).
    for n in range(5):
        light_channel.incoming.put_nowait(f"job {n}")
        await asyncio.wait_for(light_channel.seen(f"result {n}"), 5)
    release.set()
    await asyncio.wait_for(heavy_channel.seen("got after"), 5)
    assert heavy.released is True
    # The heavy session's own events keep their order: its job result (which may have come while
    # the thread had the session) is never sent inside the frame's handling.
    order = heavy_channel.sent
    assert order.index("took big") < order.index("got after")
    assert "result FIRST" in order
    for channel in (heavy_channel, light_channel):
        channel.incoming.put_nowait("close")
    await asyncio.wait_for(asyncio.gather(*runs), 5)


async def test_clients_that_go_away_mid_step_or_never_read_leave_no_task_or_queue_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("dragoman.transports.driver.DRAIN_TIMEOUT_S", 2.0)  # past the 0.2 s step
    baseline = len(asyncio.all_tasks())
    connections = Connections()
    started = threading.Event()

    def slow(request: str) -> str:
        started.set()
        time.sleep(0.2)
        return request.upper()

    worker: SerialWorker[str, str] = SerialWorker(slow, name="echo")

    async def serve(session: EchoSession, channel: Channel, **kwargs: object) -> SessionDriver:  # type: ignore[type-arg]
        run = SessionDriver(session, channel, Codec(), worker, log=get_logger("test"), **kwargs)  # type: ignore[arg-type]
        with connections.track(run):
            await run.run()
        return run

    # One goes away in the middle of its step; one never reads a frame.
    leaving = Channel(["job step"])
    leaving_task = asyncio.create_task(serve(EchoSession(), leaving))
    await asyncio.to_thread(started.wait, 5)
    assert len(connections) == 1
    leaving.incoming.put_nowait(None)
    deaf = DeafChannel([f"a{n}" for n in range(10)])
    deaf_task = asyncio.create_task(serve(EchoSession(), deaf, send_limit=3))
    left, never_read = await asyncio.wait_for(asyncio.gather(leaving_task, deaf_task), 5)
    assert never_read.session.close_code is None and deaf.closed == CloseCode.POLICY_VIOLATION
    assert left.drained and never_read.drained
    assert len(connections) == 0, "no session is left counted"
    assert len(left.outgoing) == 0 and len(never_read.outgoing) <= 3, "nothing queued past the bound"
    assert not worker._busy and not worker._waiting, "no turn is left held or waiting"
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == baseline, "no task is left running"


class FedSession(EchoSession):
    """An EchoSession that says how much audio it has taken."""

    def __init__(self, input_seconds: float) -> None:
        super().__init__()
        self.input_seconds = input_seconds
        #: What the driver said before each frame: whether its audio is refused.
        self.refused: list[bool] = []

    def refuse_audio(self, refused: bool) -> None:
        self.refused.append(refused)


class PriorityRecorder:
    """A batching-style worker that records the priority each request is run at."""

    def __init__(self) -> None:
        self.priorities: list[Priority] = []

    @contextlib.asynccontextmanager
    async def turn(self, priority: Priority) -> AsyncIterator[PriorityRecorder]:
        yield self

    async def run(
        self,
        request: str,
        cancel: CancelToken | None = None,
        timeout_s: float | None = None,
        priority: Priority = Priority.STREAMING,
    ) -> str:
        self.priorities.append(priority)
        return request.upper()


@pytest.mark.parametrize(("sent", "expected"), [(0.5, Priority.INTERACTIVE), (600.0, Priority.AHEAD)])
async def test_a_session_whose_audio_runs_ahead_of_real_time_is_served_behind(
    sent: float, expected: Priority
) -> None:
    session = FedSession(sent)
    channel = Channel(["job a", "close"])
    worker = PriorityRecorder()
    lanes = {"engine": Lane(worker, Priority.INTERACTIVE)}
    run = SessionDriver(session, channel, Codec(), log=get_logger("test"), lanes=lanes)
    await asyncio.wait_for(run.run(), 5)
    assert worker.priorities == [expected]
    assert "result A" in channel.sent
