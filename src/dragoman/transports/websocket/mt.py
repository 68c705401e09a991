"""MT protocol v1 over WebSocket: one connection is one `MTSession`.

This adapter only does what is MT's before a session exists: the `busy` refusal
at the session limit, sent at once on connect, and the handshake ("the first
message must be `init`", within `INIT_TIMEOUT_S`). A refused client that sends its
`init` without reading first (WhisperLiveKit's client does) still reads the refusal:
the socket stays open until that first frame, or `REFUSAL_LINGER_S`, then closes
with 1013. From `init` on, the session runs on the one driver
(`transports/driver.py`), its drafts on the MT service's serial worker, which
takes sessions with pending work in turn so a session streaming many updates
cannot starve another; answers that need no engine (the commit fast path) go out
at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable

from fastapi import APIRouter
from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.engines.workers import Priority
from dragoman.errors import ClientError, ServerError, with_error_id
from dragoman.logs import get_logger
from dragoman.metrics import ERRORS, REFUSALS
from dragoman.protocol.mt import encode, error_frame, parse_client_message, peek_seq
from dragoman.sessions.base import CloseCode
from dragoman.sessions.mt.events import ClientEvent, Error, ErrorCode, ServerEvent
from dragoman.sessions.mt.session import MTSession
from dragoman.transports.adapters import Frame
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.driver import SessionDriver
from dragoman.transports.readiness import Readiness
from dragoman.transports.services import MTService

log = get_logger(__name__)

#: How long a new connection may take to send `init`.
INIT_TIMEOUT_S = 30.0
#: How long a refused connection is kept open for the client's first frame, so that a client
#: that writes before it reads finds the refusal instead of a closed socket.
REFUSAL_LINGER_S = 5.0


class MTCodec:
    """MT protocol v1 frames (`protocol/mt.py`)."""

    def parse(self, frame: Frame) -> ClientEvent:
        return parse_client_message(frame).to_event()

    def write(self, event: ServerEvent) -> str:
        if isinstance(event, Error):
            ERRORS.labels(str(event.code)).inc()
        return encode(event)

    def refusal(self, error: ClientError, frame: Frame) -> ServerEvent:
        return Error(ErrorCode.BAD_PROTOCOL, error.message, seq=peek_seq(frame))

    def failure(self, error: ServerError, event: ClientEvent | None) -> ServerEvent:
        message = with_error_id("The server failed to process the update", error.error_id)
        seq = getattr(event, "seq", None)
        return Error(ErrorCode.PROCESSING_FAILED, message, seq=seq, error_id=error.error_id)


async def serve_mt(websocket: WebSocket, service: MTService) -> None:
    """The WebSocket endpoint: one MT protocol v1 session."""
    await websocket.accept()
    if service.engine is None or service.worker is None or service.sessions >= service.max_sessions:
        message = (
            f"The server is at its limit of {service.max_sessions} MT sessions; try again later."
            if service.engine is not None
            else "Translation is not available on this server right now."
        )
        await _refuse(websocket, error_frame(ErrorCode.BUSY, message), CloseCode.TRY_AGAIN_LATER, linger=True)
        return
    # The slot is taken from the connect on, so two connections cannot both take the last one.
    service.sessions += 1
    try:
        await _serve_session(websocket, service)
    finally:
        service.sessions -= 1


async def _serve_session(websocket: WebSocket, service: MTService) -> None:
    try:
        first = await asyncio.wait_for(websocket.receive_text(), INIT_TIMEOUT_S)
    except (TimeoutError, WebSocketDisconnect, RuntimeError, KeyError):
        with contextlib.suppress(Exception):
            await websocket.close(code=CloseCode.POLICY_VIOLATION)
        return
    if service.engine is None or service.worker is None:  # the service stopped meanwhile
        message = "Translation is not available on this server right now."
        await _refuse(websocket, error_frame(ErrorCode.BUSY, message), CloseCode.TRY_AGAIN_LATER)
        return
    codec = MTCodec()
    try:
        init = codec.parse(first)
    except ClientError as exc:
        frame = error_frame(ErrorCode.BAD_PROTOCOL, exc.message, seq=peek_seq(first))
        await _refuse(websocket, frame, CloseCode.PROTOCOL_ERROR)
        return
    engine = service.engine
    session = MTSession(
        session_id="mt_" + uuid.uuid4().hex[:20],
        engine_name=engine.name,
        directions=service.directions,
        decode=engine.decode,
        default_preset=service.default_preset,
        max_utterance_words=service.max_utterance_words,
        max_queued_finals=service.max_queued_finals,
        presets=service.presets,
    )
    session_log = log.bind(session=session.session_id)
    policy = ConnectionPolicy.of(websocket)
    driver = SessionDriver(
        session,
        policy.channel(websocket),
        codec,
        service.worker,
        log=session_log,
        priority=Priority.INTERACTIVE,
        idle_timeout_s=policy.idle_timeout_s,
        real_time=policy.real_time,
        engine_timeout_s=policy.engine_timeout_s,
    )
    try:
        with policy.connections.track(driver):
            await driver.run(first=init)
    finally:
        service.forget(session.session_id)
        setup = session.setup
        session_log.info(
            "mt session closed",
            direction=setup and setup.direction,
            preset=setup and setup.preset,
            **session.stats,
        )


async def _refuse(websocket: WebSocket, frame: str, close_code: int, *, linger: bool = False) -> None:
    """Send the refusal, then close; `linger`: first wait (bounded) for the client's first frame."""
    REFUSALS.labels("mt_" + str(json.loads(frame).get("code", "refused"))).inc()
    with contextlib.suppress(Exception):
        await websocket.send_text(frame)
        if linger:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(websocket.receive(), REFUSAL_LINGER_S)
        await websocket.close(code=close_code)


def mt_router(
    service: MTService | Callable[[], MTService | None],
    path: str = "/",
    *,
    readiness: Readiness | None = None,
) -> APIRouter:
    """A router serving MT protocol v1 at `path`: "/" for `dragoman mt-server`, "/v1/mt" in the app.

    `service` may be a callable returning the service (None while it is not loaded),
    for apps that create it in their lifespan. While `readiness` says the engines are
    not ready, a connection is refused as `busy` (close 1013: try again later).
    """
    router = APIRouter()

    @router.websocket(path)
    async def mt_endpoint(websocket: WebSocket) -> None:
        not_ready = readiness.refusal() if readiness is not None else None
        current = service if isinstance(service, MTService) else service()
        if not_ready is not None or current is None:
            await websocket.accept()
            message = not_ready or "Translation is not enabled on this server."
            await _refuse(
                websocket, error_frame(ErrorCode.BUSY, message), CloseCode.TRY_AGAIN_LATER, linger=True
            )
            return
        await serve_mt(websocket, current)

    return router
