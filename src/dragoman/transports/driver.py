"""The one driver that runs every session over every transport.

A session (`sessions/base.py`) is a sans-I/O state machine; a transport is a
`Channel` that moves frames; a `Codec` is the protocol layer that turns frames
into the session's events and back. The driver owns what every session needs and
no session should write again:

- the receive loop: frames in, through the codec, into the session;
- one job loop per lane (each engine the session uses, `lanes.py`): turns on the
  shared engine worker, jobs out, results back, so a step never runs inside the
  receive loop and audio that arrives meanwhile is coalesced into the next one; a
  voice agent's lanes (speech to text, LLM, TTS) run at once, so it listens while
  it thinks and speaks;
- the pieces of a streaming job (LLM tokens, TTS chunks), handed from the engine's
  thread to the session in order, as they are made;
- a bounded send queue with its own sender task, so a slow reader never blocks the
  engine worker, and unsent audio can be dropped on a barge-in (`clear`), and the
  close: what the session said last goes out, then the close code (`outbox.py`);
- a guard around every session and codec call: a bug in one session is logged
  under an error id, its client is told that id, and the connection, the worker and
  every other session go on;
- an event loop that one client cannot stall: a frame of `OFFLOAD_BYTES` or more (an
  append of audio: base64, resampling and VAD cost in proportion to its size) is
  parsed and taken by the session in a thread. Until it is done, the session's job
  results and pieces wait (in order) and its lanes plan nothing, so the session is
  never entered twice at once and its events keep their order; every other session
  goes on meanwhile;
- an engine call that hangs past `engine_timeout_s` fails that session's job with an
  error id (the worker gives the call up, `engines/workers/`); the others go on;
- a client that sends audio faster than real time: its steps run behind the live
  sessions' (`Priority.AHEAD`), and past a burst, while others are live, its appends
  are refused (`transports/real_time.py`).

As python-websockets' asyncio, sync and trio connections all drive one protocol,
the WebSocket routes (and a WebRTC data channel) only adapt their frames to this.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from dragoman.engines.workers import DEFAULT_CALL_TIMEOUT_S, CancelToken, Priority, Streamed
from dragoman.engines.workers.activity import ACTIVITY
from dragoman.errors import ClientError, IdleTimeout, MessageTooBig, ServerError, ShuttingDown
from dragoman.sessions.base import DEFAULT_LANE, AudioFed, CloseCode, Job, Session
from dragoman.transports.adapters import Channel, ClientEventT, Codec, Frame, ServerEventT
from dragoman.transports.lanes import Lane, Worker, call_engine
from dragoman.transports.outbox import Outbox
from dragoman.transports.real_time import AHEAD_SLACK_S, RealTimeGuard
from dragoman.transports.send_queue import DEFAULT_SEND_LIMIT, SendQueue

JobT = TypeVar("JobT", bound=Job)
ResultT = TypeVar("ResultT")

#: How long a closing connection waits for its engine calls to end, and then for the client
#: to take the frames still queued.
DRAIN_TIMEOUT_S = 5.0
#: Frames at least this large are handled off the event loop (100 ms of 24 kHz audio in an
#: append is about 6.5 KB; 16 KB is about a quarter second of it).
OFFLOAD_BYTES = 16 * 1024


class _Stop:
    """What `_next_frame` returns once the server shuts down."""


_STOP = _Stop()


class SessionDriver(Generic[ClientEventT, ServerEventT, JobT, ResultT]):
    """Runs one session over one channel until either side ends it."""

    def __init__(
        self,
        session: Session[ClientEventT, ServerEventT, JobT, ResultT],
        channel: Channel,
        codec: Codec[ClientEventT, ServerEventT],
        worker: Worker | None = None,
        *,
        log: Any,
        priority: Priority = Priority.STREAMING,
        lanes: Mapping[str, Lane] | None = None,
        send_limit: int = DEFAULT_SEND_LIMIT,
        tag: Callable[[ServerEventT], str | None] = lambda event: None,
        idle_timeout_s: float | None = None,
        engine_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
        real_time: RealTimeGuard | None = None,
    ) -> None:
        """A session of one engine passes its `worker` and `priority`; one of several, `lanes`."""
        if lanes is None:
            if worker is None:
                raise ValueError("a session driver needs a worker or lanes")
            lanes = {DEFAULT_LANE: Lane(worker, priority)}
        self.session = session
        self.channel = channel
        self.codec = codec
        self.lanes = dict(lanes)
        self.log = log
        self._stopping = asyncio.Event()
        self.outbox = Outbox(
            session, channel, codec, log=log, send_limit=send_limit, tag=tag, on_full=self._stopping.set
        )
        self._wake = {name: asyncio.Event() for name in self.lanes}
        self._in_flight: dict[str, CancelToken] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        #: Set when `run` ends: whether every engine call of the session ended in time.
        self.drained = True
        self.idle_timeout_s = idle_timeout_s
        #: Lanes now planning or running a job: while any is, the client is not idle.
        self._working = 0
        self._receiving: asyncio.Future[Frame | None] | None = None
        self.engine_timeout_s = engine_timeout_s
        self.real_time = real_time
        #: Set while a thread has the session (`_take_off_loop`); what comes for it meanwhile
        #: waits in `_deferred`, in order.
        self._busy = False
        self._deferred: deque[Callable[[], None]] = deque()

    async def run(self, first: ClientEventT | None = None) -> None:
        """Serve until the peer or the session closes; `first` is an event the adapter already read."""
        self._loop = asyncio.get_running_loop()
        self._opened_at = time.monotonic()
        self._running = True
        sid = self.session.session_id
        self.outbox.start(f"send-{sid}")
        jobs = [asyncio.create_task(self._job_loop(lane), name=f"{lane}-{sid}") for lane in self.lanes]
        close_code: int | None = CloseCode.NORMAL
        try:
            self.outbox.flush()
            if first is not None:
                self._receive_event(first)
            if self.session.close_code is None:
                close_code = await self._receive_loop()
        finally:
            self._running = False
            if self._receiving is not None:
                self._receiving.cancel()
            for task in jobs:
                task.cancel()
            for token in self._in_flight.values():
                token.cancel()  # the session is gone: nobody wants those results
            if self.real_time is not None:
                self.real_time.leave(id(self))
            # Drained once every engine call of the session has ended (the engines see the
            # cancelled tokens within a token or a chunk); the pool quarantines a unit that is not.
            _, pending = await asyncio.wait(jobs, timeout=DRAIN_TIMEOUT_S)
            self.drained = not pending
            code = self.session.close_code or close_code
            await self.outbox.finish(code, DRAIN_TIMEOUT_S)

    @property
    def outgoing(self) -> SendQueue:
        """The frames queued for the client."""
        return self.outbox.queue

    # -- frames in -------------------------------------------------------------------

    async def _receive_loop(self) -> int | None:
        """Frames into the session until the peer closes (None) or the session does, the
        client idles past `idle_timeout_s`, sends a frame past the size limit, or the server
        shuts down (`shut_down`)."""
        while True:
            try:
                frame = await self._next_frame()
            except MessageTooBig as exc:
                self.outbox.send(self.codec.refusal(exc, b""))
                return CloseCode.MESSAGE_TOO_BIG
            except IdleTimeout as exc:
                self.log.info("client idle; closing", seconds=self.idle_timeout_s)
                self.outbox.send(self.codec.refusal(exc, b""))
                return CloseCode.NORMAL
            if frame is _STOP and self.outgoing.overflowed:
                self.log.warning("client is not reading; closing", queued=len(self.outgoing))
                return CloseCode.POLICY_VIOLATION
            if frame is _STOP:
                self.outbox.send(self.codec.failure(ShuttingDown("the server is shutting down"), None))
                return CloseCode.GOING_AWAY
            if frame is None:
                return None
            assert not isinstance(frame, _Stop)
            self._guard_real_time()
            if len(frame) >= OFFLOAD_BYTES:
                await self._take_off_loop(frame)
            else:
                self._taken(frame, *self._take(frame))
            if self.session.close_code is not None:
                return self.session.close_code
            if self.outgoing.overflowed:
                self.log.warning("client is not reading; closing", queued=len(self.outgoing))
                return CloseCode.POLICY_VIOLATION

    def _guard_real_time(self) -> None:
        """Before a frame: refuse the session's audio while it is too far ahead of real time."""
        if self.real_time is None:
            return
        refused = self.real_time.refuses(id(self), self._ahead_s())
        if isinstance(self.session, AudioFed):
            self.session.refuse_audio(refused)

    def _ahead_s(self) -> float:
        """Seconds of audio the session has taken beyond the time it has been connected."""
        if not isinstance(self.session, AudioFed):
            return 0.0
        return self.session.input_seconds - (time.monotonic() - self._opened_at)

    async def _next_frame(self) -> Frame | _Stop | None:
        """The next frame; `_STOP` once `shut_down` is called. Raises IdleTimeout."""
        if self._receiving is None:
            self._receiving = asyncio.ensure_future(self.channel.receive())
        stopping: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        waiting: set[asyncio.Future[Any]] = {self._receiving, stopping}
        try:
            done, _ = await asyncio.wait(
                waiting, timeout=self.idle_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopping.cancel()
        if self._receiving in done:
            receiving, self._receiving = self._receiving, None
            return receiving.result()
        if self._stopping.is_set():
            return _STOP
        if self._working:
            # The client is waiting on us (a step, a draft, an answer), not idle.
            return await self._next_frame()
        raise IdleTimeout(f"No event for {self.idle_timeout_s:g} s; the session is closed.")

    def shut_down(self) -> None:
        """The server is stopping: tell the client why, then close with 1001 (going away)."""
        self._stopping.set()

    def _receive_event(self, event: ClientEventT) -> None:
        try:
            self.session.receive(event)
        except Exception as exc:  # a session bug must not end the connection
            self.outbox.report(exc, "event handling failed", event)
        self.outbox.flush()
        self._wake_all()

    def _take(self, frame: Frame) -> tuple[ClientEventT | None, Exception | None]:
        """Parse `frame` and give its event to the session; the event, and what went wrong.

        Touches only the codec and the session, so it may run in a thread (`_take_off_loop`)."""
        try:
            event = self.codec.parse(frame)
        except Exception as exc:  # a refused frame, or a protocol-layer bug (the frame is lost)
            return None, exc
        try:
            self.session.receive(event)
        except Exception as exc:  # a session bug must not end the connection
            return event, exc
        return event, None

    def _taken(self, frame: Frame, event: ClientEventT | None, error: Exception | None) -> None:
        """On the loop, after `_take`: the refusal or the error report, then what the session said."""
        if isinstance(error, ClientError) and event is None:
            self.outbox.send(self.codec.refusal(error, frame))
            return
        if error is not None:
            what = "frame parsing failed" if event is None else "event handling failed"
            self.outbox.report(error, what, event)
            if event is None:
                return
        self.outbox.flush()
        self._wake_all()

    async def _take_off_loop(self, frame: Frame) -> None:
        """`_take` a large frame in a thread, so that the loop serves every other session
        meanwhile; this session's results and pieces wait for it, in order."""
        self._busy = True
        try:
            # An engine call for `engines.workers.activity`: a large frame's VAD (and turn model).
            taken = await asyncio.to_thread(ACTIVITY.counted(lambda: self._take(frame)))
        finally:
            self._busy = False
        self._taken(frame, *taken)
        while self._deferred and not self._busy:
            self._deferred.popleft()()
        self._wake_all()

    def _later(self, call: Callable[[], None]) -> bool:
        """Defer `call` while a thread has the session; True when it was deferred."""
        if self._busy:
            self._deferred.append(call)
        return self._busy

    # -- engine jobs -----------------------------------------------------------------

    def _wake_all(self) -> None:
        for event in self._wake.values():
            event.set()

    async def _job_loop(self, lane: str) -> None:
        wake = self._wake[lane]
        while True:
            try:
                ran = await self._next_job(lane)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the worker itself failed or closed (shutdown)
                self.outbox.report(exc, "engine worker failed", None)
                return
            if not ran:
                await wake.wait()
                wake.clear()

    async def _next_job(self, lane: str) -> bool:
        """Plan and run one job inside a turn on the lane's worker; False when there was none."""
        spec = self.lanes[lane]
        self._working += 1
        try:
            return await self._run_next_job(lane, spec)
        finally:
            self._working -= 1

    async def _run_next_job(self, lane: str, spec: Lane) -> bool:
        async with spec.worker.turn(spec.priority) as slot:
            if self._busy:
                return False  # a thread has the session; its end wakes every lane
            try:
                job = self.session.next_job(lane)
            except Exception as exc:
                self.outbox.report(exc, "job planning failed", None)
                return False
            finally:
                self.outbox.flush()  # planning may answer without the engine (a fast path)
            if job is None:
                return False
            self._in_flight[lane] = job.cancel
            request: Any = job.request
            if getattr(job, "streaming", False):
                request = Streamed(job.request, job.cancel, self._piece_sink(job))
            try:
                outcome = await call_engine(
                    slot,
                    lane,
                    job,
                    request,
                    timeout_s=self.engine_timeout_s,
                    priority=self._priority(job),
                    log=self.log,
                )
            finally:
                self._in_flight.pop(lane, None)
            self._deliver(job, outcome)
        return True

    def _priority(self, job: JobT) -> Priority:
        """The job's own priority, or `AHEAD` once its session has sent more audio than the
        time it has been connected allows: one client flooding audio must not slow the steps
        of those that speak at real time (their calls never take its requests)."""
        if self._ahead_s() > AHEAD_SLACK_S:
            return Priority.AHEAD
        return job.priority

    def _piece_sink(self, job: JobT) -> Callable[[Any], None]:
        """What the engine calls, from its thread, with each piece of a streaming job.

        Pieces are queued on the event loop in the order they were made, and all of
        them before the job's own result (which comes through the same queue after
        the call returns).
        """
        loop = self._loop
        assert loop is not None

        def emit(piece: Any) -> None:
            loop.call_soon_threadsafe(self._progress, job, piece)

        return emit

    def _progress(self, job: JobT, piece: Any) -> None:
        if not self._running or self._later(lambda: self._progress(job, piece)):
            return
        try:
            cast(Any, self.session).job_progress(job, piece)
        except Exception as exc:
            self.outbox.report(exc, "job progress handling failed", None)
        self.outbox.flush()
        self._wake_all()

    def _deliver(self, job: JobT, outcome: Any) -> None:
        """Hand a job's result, or its `DragomanError`, back to the session."""
        if self._later(lambda: self._deliver(job, outcome)):
            return
        try:
            if isinstance(outcome, ClientError | ServerError):
                self.session.job_failed(job, outcome)
            else:
                self.session.job_done(job, outcome)
        except Exception as exc:
            self.outbox.report(exc, "job result handling failed", None)
        self.outbox.flush()
        self._wake_all()  # a result on one lane may make work for another
