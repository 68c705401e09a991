"""The voice agent (`POST /v1/realtime/calls`) and the interpreter
(`POST /v1/realtime/translations/calls`, `translation.py`) over WebRTC, the `webrtc` extra (aiortc).

One more adapter to the one session driver: the `oai-events` data channel is the
driver's `Channel` (`channel.py`), the caller's audio track comes in through the same
channel as the session's input audio (`tracks.py`), `codec.py` is WebRTC's wire format
(the agent's GA events, less the three differences from WebSocket), and the answer is
played out by the server at real time on the outbound track from a buffer it flushes
itself on a cancel or a barge-in (`playout.py`). `calls.py` has the routes, `call.py`
one running call, `peer.py` its peer connection, and `sideband.py` a server's WebSocket
attached to a running call (`/v1/realtime?call_id=…`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.responses import JSONResponse

if TYPE_CHECKING:
    from dragoman.transports.agent_service import AgentService
    from dragoman.transports.interpreter_service import InterpreterService
    from dragoman.transports.readiness import Readiness


def mount_webrtc(
    app: FastAPI,
    agent: Callable[[], AgentService | None],
    readiness: Readiness,
    interpreter: Callable[[], InterpreterService | None] = lambda: None,
    replica_id: str | None = None,
) -> None:
    """The call routes, whose call ids name `replica_id` where it is set; without the `webrtc`
    extra, a 501 that says how to get them."""
    if importlib.util.find_spec("aiortc") is not None:
        from dragoman.transports.webrtc.calls import Calls, calls_router
        from dragoman.transports.webrtc.peer import ice_servers
        from dragoman.transports.webrtc.translation import translation_calls_router

        # The running calls, where `/v1/realtime?call_id=…` finds the call it attaches to.
        app.state.calls = Calls(ice_servers(), replica_id)
        app.include_router(calls_router(agent, readiness, app.state.calls))
        app.include_router(translation_calls_router(interpreter, readiness, app.state.calls))
        return

    @app.api_route("/v1/realtime/calls", methods=["POST"])
    @app.api_route("/v1/realtime/calls/{call_id}", methods=["DELETE"])
    @app.api_route("/v1/realtime/translations/calls", methods=["POST"])
    @app.api_route("/v1/realtime/translations/calls/{call_id}", methods=["DELETE"])
    async def not_installed() -> JSONResponse:
        message = "WebRTC needs the server's 'webrtc' extra: pip install 'dragoman[webrtc]'."
        body = {
            "error": {"type": "server_error", "code": "not_implemented", "message": message, "param": None}
        }
        return JSONResponse(body, status_code=501)
