"""Frames out of one session: what it says, written by the codec, queued, sent, and the close.

The driver (`driver.py`) flushes the session after every event, result and piece; the outbox
writes each event as a frame at once (in the state it was said in) and queues it for its own
sender task, so a slow reader never blocks the engine worker. A bug in the session or the codec
while saying something is reported to the client under an error id, and the connection goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Generic

from dragoman.errors import DragomanError, EngineFailure
from dragoman.logs import log_failure
from dragoman.metrics import ERRORS
from dragoman.sessions.base import Observed, Session
from dragoman.transports.adapters import Channel, ClientEventT, Codec, ServerEventT
from dragoman.transports.observations import record
from dragoman.transports.send_queue import SendQueue


def count_error(event: object) -> None:
    """Count an error a session says (`dragoman_errors_total`): its error events and failed
    items carry the `DragomanError` as `error`. Counted here, as it goes out, so that sessions
    and the wire models stay free of metrics."""
    error = getattr(event, "error", None)
    if isinstance(error, DragomanError):
        ERRORS.labels(error.code).inc()


class Outbox(Generic[ClientEventT, ServerEventT]):
    """What one session says, on its way to the client over one channel."""

    def __init__(
        self,
        session: Session[ClientEventT, ServerEventT, Any, Any],
        channel: Channel,
        codec: Codec[ClientEventT, ServerEventT],
        *,
        log: Any,
        send_limit: int,
        tag: Callable[[ServerEventT], str | None],
        on_full: Callable[[], None],
    ) -> None:
        """`on_full` is called when a frame finds the queue full: the client is not reading."""
        self.session = session
        self.channel = channel
        self.codec = codec
        self.log = log
        self.queue = SendQueue(send_limit)
        self._tag = tag
        self._on_full = on_full
        self._sender: asyncio.Task[None] | None = None

    def start(self, name: str) -> None:
        """Start the sender task, which sends queued frames until `finish`."""
        self._sender = asyncio.create_task(self._send_loop(), name=name)

    def flush(self) -> None:
        """Write what the session said, now: a frame is written in the state it was said in;
        and record what it observed (`sessions/base.py`, `Observed`)."""
        try:
            events = self.session.events_to_send()
            if isinstance(self.session, Observed):
                record(self.session.take_observations())
        except Exception as exc:
            self.report(exc, "event collection failed", None)
            return
        for event in events:
            self.send(event)

    def send(self, event: ServerEventT) -> None:
        sent = event
        try:
            frame = self.codec.write(event)
        except Exception as exc:  # a bug in the protocol layer must not end the connection either
            error_id = log_failure(self.log, "event writing failed", exc, kind=type(event).__name__)
            sent = self.codec.failure(EngineFailure("event writing failed", error_id=error_id), None)
            frame = self.codec.write(sent)
        if frame is None:
            return
        count_error(sent)
        if not self.queue.put(frame, self._tag(event)):
            # A client `send_limit` frames behind is not reading: close it now rather than
            # buffer without end, even while it sends nothing that would wake the receive loop.
            self._on_full()

    def report(self, exc: Exception, what: str, event: ClientEventT | None) -> None:
        """Log a fault under an error id and tell the client that id."""
        error_id = log_failure(self.log, what, exc)
        self._flush_safely()
        self.send(self.codec.failure(EngineFailure(what, error_id=error_id), event))

    def _flush_safely(self) -> None:
        """What the session said before it failed goes first (if it can still say it)."""
        with contextlib.suppress(Exception):
            for event in self.session.events_to_send():
                self.send(event)

    async def _send_loop(self) -> None:
        while (frame := await self.queue.get()) is not None:
            await self.channel.send(frame)

    async def finish(self, code: int | None, timeout_s: float) -> None:
        """Send what is queued, then close; when the peer closed first, nothing can be sent.

        A client that stopped reading is given `timeout_s` to take what is queued.
        """
        sender = self._sender
        assert sender is not None, "finish() before start()"
        if code is None:
            sender.cancel()
        else:
            self.queue.close()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):  # the client may be gone
            await asyncio.wait_for(sender, timeout_s)
        if code is not None:
            with contextlib.suppress(Exception):
                await self.channel.close(code)
