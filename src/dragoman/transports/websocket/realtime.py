"""`/v1/realtime`: drives a transcription session over a WebSocket.

Two tasks per connection: the receive loop parses client frames (protocol) into
events for the sans-I/O session, and the decode task runs the session's steps on
the shared scheduler. Audio that arrives while a step runs is coalesced into the
next step. What the session says goes out written by the protocol, in the
client's generation.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, Literal

from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.errors import ClientError, EngineFailure, ServerError
from dragoman.logs import get_logger, log_failure
from dragoman.protocol.realtime.client_events import ClientParser, default_input_rate, generation_of
from dragoman.protocol.realtime.server_events import ErrorDetail, ErrorEvent, wire_event
from dragoman.sessions.transcription.events import Error, Rejected, ServerEvent
from dragoman.sessions.transcription.session import SessionConfig, TranscriptionSession
from dragoman.transports.runtime import TranscriptionService

log = get_logger(__name__)


async def refuse(
    websocket: WebSocket,
    code: str,
    message: str,
    *,
    error_type: Literal["invalid_request_error", "server_error"] = "invalid_request_error",
    close_code: int = 1008,
) -> None:
    """Tell the client why in an OpenAI error event, then close (1008: policy violation,
    1013: try again later)."""
    await websocket.accept()
    event = ErrorEvent(error=ErrorDetail(type=error_type, code=code, message=message))
    await websocket.send_text(json.dumps(event.wire()))
    await websocket.close(code=close_code)


class RealtimeConnection:
    def __init__(self, websocket: WebSocket, service: TranscriptionService, settings: Any) -> None:
        self.websocket = websocket
        self.service = service
        self.parser = ClientParser(generation_of(websocket.headers.get("openai-beta", "")))
        self.session = TranscriptionSession(
            session_id="sess_" + uuid.uuid4().hex[:20],
            engine=service.profile,
            config=SessionConfig.defaults(settings, default_input_rate(self.parser.generation)),
            vad_factory=service.vad_factory(),
        )
        self._wake = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self.log = log.bind(session=self.session.session_id)

    async def run(self) -> None:
        self.log.info("session opened", generation=self.parser.generation.value)
        decoder = asyncio.create_task(self._decode_loop(), name=f"decode-{self.session.session_id}")
        try:
            await self._flush()
            await self._receive_loop()
        except WebSocketDisconnect:
            pass
        finally:
            decoder.cancel()
            try:
                await decoder
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # e.g. a send on a socket the client already closed
                log_failure(self.log, "decode task ended", exc)
            self.log.info("session closed", revisions=self.session.revisions)

    async def _receive_loop(self) -> None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            text = message.get("text")
            try:
                # A binary frame is refused by the parser, as an `error` event.
                self.session.handle(self.parser.parse(text if text is not None else b""))
            except Exception as exc:  # a bug in the session must not end the connection
                error_id = log_failure(self.log, "event handling failed", exc)
                self.session.handle(Rejected(EngineFailure("event handling failed", error_id=error_id)))
            await self._flush()
            self._wake.set()

    async def _decode_loop(self) -> None:
        while True:
            job = self.session.next_job()
            if job is None:
                # next_job may have completed an item without an engine call.
                await self._flush()
                await self._wake.wait()
                self._wake.clear()
                continue
            try:
                result = await self.service.scheduler.submit(job.request)
            except (ClientError, ServerError) as exc:
                self.session.job_failed(job, exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error_id = log_failure(self.log, "step failed", exc, item=job.item.item_id)
                self.session.job_failed(job, EngineFailure("step failed", error_id=error_id))
            else:
                self.session.job_done(job, result)
            await self._flush()

    async def _flush(self) -> None:
        async with self._send_lock:
            # Written at once, not while sending: a `*.updated` must be written in the
            # generation of its update, before the receive loop parses the next one.
            frames = [self._write(event) for event in self.session.take_events()]
            for frame in frames:
                await self.websocket.send_text(json.dumps(frame, ensure_ascii=False))

    def _write(self, event: ServerEvent) -> dict[str, Any]:
        try:
            return wire_event(event, self.parser.generation)
        except Exception as exc:  # a bug in the protocol must not end the connection either
            error_id = log_failure(self.log, "event writing failed", exc, kind=type(event).__name__)
            failure = EngineFailure("event writing failed", error_id=error_id)
            return wire_event(Error(failure), self.parser.generation)
