"""`/v1/realtime`: drives a transcription session over a WebSocket.

Two tasks per connection: the receive loop feeds client events to the sans-I/O
session, and the decode task runs the session's steps on the shared scheduler.
Audio that arrives while a step runs is coalesced into the next step.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.errors import ClientError, EngineFailure, InvalidEvent, ServerError
from dragoman.logs import get_logger, log_failure
from dragoman.protocol.realtime import Generation
from dragoman.protocol.realtime_events import ErrorDetail, ErrorEvent
from dragoman.server.runtime import TranscriptionService
from dragoman.sessions.transcription import SessionConfig, TranscriptionSession

log = get_logger(__name__)


def generation_of(websocket: WebSocket) -> Generation:
    """`client.beta.realtime.connect` adds `OpenAI-Beta: realtime=v1` (PROTOCOLS.md)."""
    beta = websocket.headers.get("openai-beta", "")
    return Generation.BETA if "realtime=v1" in beta else Generation.GA


async def refuse(websocket: WebSocket, code: str, message: str) -> None:
    """Tell the client why in an OpenAI error event, then close (policy violation)."""
    await websocket.accept()
    event = ErrorEvent(error=ErrorDetail(type="invalid_request_error", code=code, message=message))
    await websocket.send_text(json.dumps(event.wire()))
    await websocket.close(code=1008)


class RealtimeConnection:
    def __init__(self, websocket: WebSocket, service: TranscriptionService, settings: Any) -> None:
        self.websocket = websocket
        self.service = service
        generation = generation_of(websocket)
        self.session = TranscriptionSession(
            session_id="sess_" + uuid.uuid4().hex[:20],
            engine=service.profile,
            config=SessionConfig.defaults(settings, generation),
            generation=generation,
            vad_factory=service.vad_factory(),
        )
        self._wake = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self.log = log.bind(session=self.session.session_id)

    async def run(self) -> None:
        self.log.info("session opened", generation=self.session.generation.value)
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
            if text is None:
                self.session.receive_error(InvalidEvent("Events must be JSON text frames, not binary."))
            else:
                try:
                    self.session.receive(text)
                except Exception as exc:  # a bug in the session must not end the connection
                    error_id = log_failure(self.log, "event handling failed", exc)
                    self.session.receive_error(EngineFailure("event handling failed", error_id=error_id))
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
            for event in self.session.take_events():
                await self.websocket.send_text(json.dumps(event, ensure_ascii=False))
