"""`POST /v1/realtime/calls` and `DELETE /v1/realtime/calls/{call_id}`: WebRTC calls.

The handshake, from the reference agent's description of the WebRTC transport: "the
client POSTs an SDP offer to POST /v1/realtime/calls (Content-Type: application/sdp)
and gets the SDP answer (201, with a Location: /v1/realtime/calls/{call_id} header)".
The official SDK's `client.realtime.calls.create(sdp=..., session=...)` sends the same
offer as a multipart form, with the session config as JSON in a `session` part (and
only the SDP, as `application/sdp`, when there is no config); the config is applied
before `session.created`. So is the config bound to the request's key, where the
access guard put one on `request.state.session_config` (an ephemeral key's), after the
form's. `DELETE` on the Location hangs up. Past `--num-pipelines` a call is refused
with 503 `session_limit_reached`. The routes sit behind the same access guard as every
other endpoint.

Behind a load balancer, the `DELETE` (and a sideband's `?call_id=`) must reach the replica that
holds the call: a replica given an id (`--replica-id`) names itself in its call ids,
`rtc_<replica>_<random>`, for the balancer to route on (docs/deploy.md has nginx's map).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aiortc import RTCIceServer
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from dragoman.errors import ClientError, InvalidValue
from dragoman.logs import get_logger, log_failure
from dragoman.metrics import REFUSALS
from dragoman.protocol.json_frames import BadJSON, load_json
from dragoman.protocol.realtime.client_parsers import AgentClientParser
from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.session import AgentSession
from dragoman.transports.agent_service import AgentService
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.forms import multipart_form
from dragoman.transports.pool import ADMISSION_WAIT_S, PipelineUnit
from dragoman.transports.readiness import Readiness
from dragoman.transports.webrtc.call import Call
from dragoman.transports.webrtc.codec import INPUT_RATE, CallCodec
from dragoman.transports.webrtc.peer import check_offer, ice_servers
from dragoman.transports.webrtc.playout import Playout

log = get_logger(__name__)

#: The largest offer taken: an SDP offer is a few kilobytes.
MAX_OFFER_BYTES = 256 * 1024
#: How long a hang-up waits for the call to let its unit go.
HANG_UP_TIMEOUT_S = 10.0


def error_response(
    status: int, code: str, message: str, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """OpenAI's JSON error body."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"type": kind, "code": code, "message": message, "param": param}}
    return JSONResponse(body, status_code=status, headers=headers)


async def read_offer(request: Request) -> tuple[str, dict[str, Any] | None]:
    """The SDP offer and the form's session config (None without one); raises ClientError."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_OFFER_BYTES:
        raise InvalidValue(f"The offer is larger than {MAX_OFFER_BYTES} bytes.")
    session: dict[str, Any] | None = None
    if content_type == "multipart/form-data":
        async with multipart_form(
            request, "sdp", max_files=2, max_fields=8, max_part_size=MAX_OFFER_BYTES
        ) as form:
            sdp = await _text(form.get("sdp"))
            raw_session = await _text(form.get("session"))
        if raw_session:
            try:
                # Strict: the session is written back in `session.created`, which must be JSON.
                parsed = load_json(raw_session, "session part", strict_numbers=True)
            except BadJSON as exc:
                raise InvalidValue(str(exc), param="session") from None
            if not isinstance(parsed, dict):
                raise InvalidValue("The session part must be a JSON object.", param="session")
            session = parsed
    elif content_type in ("application/sdp", "text/plain", ""):
        body = await request.body()
        if len(body) > MAX_OFFER_BYTES:
            raise InvalidValue(f"The offer is larger than {MAX_OFFER_BYTES} bytes.")
        sdp = body.decode("utf-8", errors="replace")
    else:
        raise InvalidValue(
            "Send the SDP offer as Content-Type application/sdp, or as multipart/form-data with "
            "'sdp' and 'session' parts."
        )
    check_offer(sdp)
    return sdp, session


async def _text(value: Any) -> str:
    """A form part, given as a field or as a file."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    data = await value.read()
    return bytes(data).decode("utf-8", errors="replace")


def configure(session: AgentSession, *configs: Mapping[str, Any] | None) -> None:
    """Apply session objects (GA `session.update` shape) in order, before `session.created`."""
    parser = AgentClientParser(Generation.GA)
    for config in configs:
        if config is None:
            continue
        frame = json.dumps({"type": "session.update", "session": {"type": "realtime", **config}})
        event = parser.parse(frame)
        if isinstance(event, agent.Rejected):
            if isinstance(event.error, ClientError):
                raise event.error
            raise InvalidValue("The session config is not valid.", param="session")
        assert isinstance(event, agent.UpdateSession)
        session.configure(event.values)


def agent_codec(session: AgentSession) -> Callable[[Playout], CallCodec]:
    """The agent's call codec over a call's playout, interrupting as `session`'s turn detection says."""

    def interrupts() -> bool:
        turns = session.config.turn_detection
        return turns is not None and turns.interrupt_response

    return lambda playout: CallCodec(playout, interrupts=interrupts)


def _release(service: AgentService, unit: PipelineUnit, drained: bool) -> None:
    service.pool.release(unit, drained=drained)


class Calls:
    """The calls running now, by id."""

    def __init__(self, servers: list[RTCIceServer] | None, replica_id: str | None = None) -> None:
        self.ice_servers = servers
        self.running: dict[str, Call] = {}
        self._prefix = f"rtc_{replica_id}_" if replica_id else "rtc_"

    def new_id(self) -> str:
        """A fresh call id: `rtc_<replica>_<20 hex digits>`, or `rtc_<20 hex digits>` for a
        server that is given no replica id."""
        return self._prefix + uuid.uuid4().hex[:20]

    def start(self, call: Call) -> None:
        self.running[call.id] = call
        call.task = asyncio.create_task(self._run(call), name=f"call-{call.id}")

    async def _run(self, call: Call) -> None:
        try:
            await call.run()
        finally:
            self.running.pop(call.id, None)


def calls_router(
    agent_service: Callable[[], AgentService | None], readiness: Readiness, calls: Calls | None = None
) -> APIRouter:
    """The call routes, over `calls` (the running calls, which a sideband connection looks up);
    raises ValueError for ICE servers configured wrong (at start-up)."""
    router = APIRouter()
    calls = calls if calls is not None else Calls(ice_servers())

    @router.post("/v1/realtime/calls")
    async def create_call(request: Request) -> Response:
        not_ready = readiness.refusal()
        if not_ready is not None:
            return error_response(503, "server_not_ready", not_ready, headers={"Retry-After": "5"})
        service = agent_service()
        if service is None:
            return error_response(
                404, "service_unavailable", "The voice agent is not enabled on this server."
            )
        try:
            offer, form_session = await read_offer(request)
        except ClientError as exc:
            return error_response(400, exc.code, exc.message, exc.param)
        call_id = calls.new_id()
        session_id = "sess_" + call_id.rsplit("_", 1)[1]
        unit = await service.pool.acquire_within(session_id, ADMISSION_WAIT_S)
        if unit is None:
            service.usage["sessions_refused"] += 1
            REFUSALS.labels("session_limit_reached").inc()
            message = f"All {len(service.pool.units)} voice-agent pipelines are in use; try again later."
            return error_response(503, "session_limit_reached", message, headers={"Retry-After": "5"})

        def build() -> Call:
            session = service.new_session(session_id, INPUT_RATE, media_track=True)
            configure(session, form_session, getattr(request.state, "session_config", None))
            release = functools.partial(_release, service, unit)
            return Call(
                call_id,
                service,
                session,
                agent_codec(session),
                call_policy(request),
                calls.ice_servers,
                release,
                unit=unit.index,
            )

        made = await set_up(build, offer, lambda: service.pool.release(unit, drained=True))
        if isinstance(made, Response):
            return made
        service.usage["sessions_opened"] += 1
        log.info("call answered", call=call_id, session=session_id, unit=unit.index)
        return answered(calls, *made, f"/v1/realtime/calls/{call_id}")

    @router.delete("/v1/realtime/calls/{call_id}")
    async def hang_up(call_id: str) -> Response:
        return await hang_up_call(calls, call_id)

    return router


async def set_up(
    build: Callable[[], Call], offer: str, release: Callable[[], None]
) -> tuple[Call, str] | Response:
    """Build a call and answer `offer`: the call and its SDP answer, or, once the call and (by
    `release`) its admission are let go, the error response."""
    call: Call | None = None
    try:
        call = build()
        return call, await call.connect(offer)
    except ClientError as exc:  # the offer or the session config
        refused = error_response(400, exc.code, exc.message, exc.param)
    except Exception as exc:
        error_id = log_failure(log, "call setup failed", exc)
        refused = error_response(500, "server_error", f"The call could not be set up (error id {error_id}).")
    if call is not None:
        await call.abandon()
    release()
    return refused


def answered(calls: Calls, call: Call, sdp: str, location: str) -> Response:
    """Start `call` and answer with its SDP: 201, and where to hang up."""
    calls.start(call)
    return Response(sdp, status_code=201, media_type="application/sdp", headers={"Location": location})


async def hang_up_call(calls: Calls, call_id: str) -> Response:
    """`DELETE` on a call's Location: 204 once it has ended (or `HANG_UP_TIMEOUT_S` passed)."""
    call = calls.running.get(call_id)
    if call is None:
        return error_response(404, "call_not_found", f"No call {call_id[:64]!r} is in progress.", "call_id")
    call.hang_up()
    if call.task is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(call.task), HANG_UP_TIMEOUT_S)
    return Response(status_code=204)


def call_policy(request: Request) -> ConnectionPolicy:
    policy = getattr(request.app.state, "policy", None)
    return policy if isinstance(policy, ConnectionPolicy) else ConnectionPolicy()
