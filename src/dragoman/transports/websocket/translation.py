"""`/v1/realtime/translations`: OpenAI's Realtime translation session over a WebSocket.

`GET /v1/realtime/translations?model=gpt-realtime-translate` (the SDK's
`client.realtime.translations.connect(model=...)`); this server's own model name is
taken too, and an unknown one is refused. The frames are OpenAI's translation events
(`protocol/realtime/translation_*.py`); the session runs on the one driver with a lane
for each shared engine: speech to text, MT and text to speech. A session opened with an
ephemeral key (`POST /v1/realtime/translations/client_secrets`) starts with the session
config bound to it.

Refusals come as an `error` event, then the close: 1008 for the client's fault (an
unknown model), 1013 (try again later) at the session limit or while the server loads;
the SDK reconnects by itself only on the latter.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.websockets import WebSocket

from dragoman.errors import ClientError, ServerError
from dragoman.logs import get_logger
from dragoman.protocol.realtime.translation_client import TranslationParser
from dragoman.protocol.realtime.translation_server import translation_wire
from dragoman.sessions.base import CloseCode
from dragoman.sessions.translation.events import ClientEvent, Error, ServerEvent, SessionConfigured
from dragoman.sessions.translation.session import TranslationJob, TranslationResult
from dragoman.transports.adapters import Frame
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.driver import SessionDriver
from dragoman.transports.interpreter_service import InterpreterService, admission
from dragoman.transports.readiness import Readiness
from dragoman.transports.websocket.bound import bound_config, start_bound
from dragoman.transports.websocket.realtime import refuse

log = get_logger(__name__)


class TranslationCodec:
    """OpenAI's translation events of one connection."""

    def __init__(self) -> None:
        self.parser = TranslationParser()

    def parse(self, frame: Frame) -> ClientEvent:
        # A refused frame comes back as `Rejected`, whose error the session sends in order.
        return self.parser.parse(frame)

    def write(self, event: ServerEvent) -> str:
        return json.dumps(translation_wire(event), ensure_ascii=False)

    def refusal(self, error: ClientError, frame: Frame) -> ServerEvent:
        return Error(error)

    def failure(self, error: ServerError, event: ClientEvent | None) -> ServerEvent:
        return Error(error, getattr(event, "event_id", None))


def requested_model(websocket: WebSocket, bound: dict[str, Any] | None) -> str | None:
    """The model the client asked for: the URL's, else the one bound to its ephemeral key."""
    model = websocket.query_params.get("model")
    if not model and bound is not None and isinstance(bound.get("model"), str):
        model = bound["model"]
    return model or None


async def translation_endpoint(
    websocket: WebSocket, service: InterpreterService | None, readiness: Readiness
) -> None:
    """Admit a connection (readiness, the model, the session limit), then serve it."""
    not_ready = readiness.refusal()
    if not_ready is not None:
        await refuse(
            websocket,
            "server_not_ready",
            not_ready,
            error_type="server_error",
            close_code=CloseCode.TRY_AGAIN_LATER,
        )
        return
    bound = bound_config(websocket)
    model = requested_model(websocket, bound)
    refusal = admission(service, model)
    if refusal is not None:
        close_code = CloseCode.TRY_AGAIN_LATER if refusal.later else CloseCode.POLICY_VIOLATION
        await refuse(websocket, refusal.code, refusal.message, close_code=close_code)
        return
    assert service is not None and model is not None
    # The slot is taken before the first await, so concurrent handshakes cannot all take the last one.
    service.sessions += 1
    try:
        await websocket.accept()
        await _serve(websocket, service, model, bound)
    finally:
        service.sessions -= 1


async def _serve(
    websocket: WebSocket, service: InterpreterService, model: str, bound: dict[str, Any] | None
) -> None:
    session = service.new_session(model)
    codec = TranslationCodec()
    session_log = log.bind(session=session.session_id)
    session_log.info("translation session opened", model=model, language=session.config.language)
    policy = ConnectionPolicy.of(websocket)
    driver: SessionDriver[ClientEvent, ServerEvent, TranslationJob, TranslationResult] = SessionDriver(
        start_bound(session, codec.parser, bound, SessionConfigured),
        policy.channel(websocket),
        codec,
        log=session_log,
        lanes=service.lanes(),
        idle_timeout_s=policy.idle_timeout_s,
        real_time=policy.real_time,
        engine_timeout_s=policy.engine_timeout_s,
    )
    try:
        with policy.connections.track(driver):
            await driver.run()
    finally:
        service.session_ended(session)
        session_log.info(
            "translation session closed",
            input_seconds=round(session.input_seconds, 2),
            output_seconds=round(session.speech.seconds, 2),
            drained=driver.drained,
            **session.stats,
        )
