"""`/v1/realtime?intent=transcription`: a transcription session over a WebSocket.

The frames are OpenAI Realtime client and server events (`protocol/realtime`), in
the name generation the client speaks; the session and its engine jobs run on the
one driver (`transports/driver.py`), with its steps on the shared ASR worker.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from starlette.websockets import WebSocket

from dragoman.engines.workers import Priority
from dragoman.errors import ClientError, ServerError
from dragoman.logs import get_logger
from dragoman.metrics import REFUSALS
from dragoman.protocol.realtime.client_parsers import ClientParser, generation_of
from dragoman.protocol.realtime.server_events import ErrorDetail, ErrorEvent, wire_event
from dragoman.sessions.base import CloseCode
from dragoman.sessions.transcription.events import ClientEvent, Error, ServerEvent, SessionConfigured
from dragoman.transports.adapters import Frame
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.driver import SessionDriver
from dragoman.transports.services import TranscriptionService
from dragoman.transports.websocket.bound import bound_client_secret, bound_config, start_bound

log = get_logger(__name__)


async def refuse(
    websocket: WebSocket,
    code: str,
    message: str,
    *,
    error_type: Literal["invalid_request_error", "server_error"] = "invalid_request_error",
    close_code: int = CloseCode.POLICY_VIOLATION,
) -> None:
    """Tell the client why in an OpenAI error event, then close (1008: policy violation,
    1013: try again later)."""
    REFUSALS.labels(code).inc()
    await websocket.accept()
    event = ErrorEvent(error=ErrorDetail(type=error_type, code=code, message=message))
    await websocket.send_text(json.dumps(event.wire()))
    await websocket.close(code=close_code)


class RealtimeCodec:
    """Realtime events of one connection, written in the generation the client speaks."""

    def __init__(self, parser: ClientParser, client_secret: dict[str, Any] | None = None) -> None:
        self.parser = parser
        #: The ephemeral key that opened the session, which beta's session object carries.
        self.client_secret = client_secret

    def parse(self, frame: Frame) -> ClientEvent:
        # A refused frame comes back as `Rejected`, whose error the session sends in order.
        return self.parser.parse(frame)

    def write(self, event: ServerEvent) -> str:
        wire = wire_event(event, self.parser.generation, self.client_secret)
        return json.dumps(wire, ensure_ascii=False)

    def refusal(self, error: ClientError, frame: Frame) -> ServerEvent:
        return Error(error)

    def failure(self, error: ServerError, event: ClientEvent | None) -> ServerEvent:
        return Error(error, getattr(event, "event_id", None))


async def serve_transcription(websocket: WebSocket, service: TranscriptionService) -> None:
    """Run one accepted WebSocket as a transcription session until either side closes."""
    worker = service.worker
    assert worker is not None, "served only once the service started"
    parser = ClientParser(generation_of(websocket.headers.get("openai-beta", "")))
    session = service.new_session("sess_" + uuid.uuid4().hex[:20], parser.generation)
    session_log = log.bind(session=session.session_id)
    session_log.info("session opened", generation=parser.generation.value)
    policy = ConnectionPolicy.of(websocket)
    driver = SessionDriver(
        # A session opened with an ephemeral key starts with the config bound to it.
        start_bound(session, parser, bound_config(websocket), SessionConfigured),
        policy.channel(websocket),
        RealtimeCodec(parser, bound_client_secret(websocket)),
        worker,
        log=session_log,
        priority=Priority.STREAMING,
        idle_timeout_s=policy.idle_timeout_s,
        real_time=policy.real_time,
        engine_timeout_s=policy.engine_timeout_s,
    )
    # The route holds the session's slot (`TranscriptionService.session_slot`) around this call.
    try:
        with policy.connections.track(driver):
            await driver.run()
    finally:
        session_log.info("session closed", revisions=session.revisions, coalesced=session.coalesced)
