"""The FastAPI application: `GET /health`, `GET /v1/models`, `/v1/realtime` and `/v1/mt`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, WebSocket

from dragoman.config import Settings
from dragoman.sessions.base import CloseCode
from dragoman.transports.readiness import Readiness, mount
from dragoman.transports.runtime import Runtime
from dragoman.transports.websocket.mt import mt_router
from dragoman.transports.websocket.realtime import refuse, serve_transcription


def create_app(settings: Settings) -> FastAPI:
    runtime = Runtime(settings)
    readiness = Readiness(runtime.start)
    app = mount(
        "dragoman",
        readiness,
        runtime.close,
        lambda: {
            "services": {"transcription": runtime.transcription is not None, "mt": runtime.mt is not None},
            "engines": runtime.engines(),
        },
        host=settings.host,
        port=settings.port,
        services=settings.services,
    )
    app.state.runtime = runtime

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        created = int(runtime.started)
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "dragoman"}
            for name in runtime.model_names()
        ]
        return {"object": "list", "data": data}

    @app.websocket("/v1/realtime")
    async def realtime(websocket: WebSocket) -> None:
        service = runtime.transcription
        intent = websocket.query_params.get("intent")
        if intent != "transcription":
            await refuse(
                websocket,
                "unsupported_intent",
                "This server serves transcription sessions on /v1/realtime?intent=transcription.",
            )
            return
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
        if service is None:
            await refuse(websocket, "service_unavailable", "Transcription is not enabled on this server.")
            return
        await websocket.accept()
        await serve_transcription(websocket, service, settings.transcription)

    # MT protocol v1; the standalone `dragoman mt-server` serves the same router at "/".
    app.include_router(mt_router(lambda: runtime.mt, path="/v1/mt", readiness=readiness))
    return app
