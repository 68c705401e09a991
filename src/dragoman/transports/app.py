"""The FastAPI application: `GET /health`, `GET /v1/models`, `/v1/realtime` (the voice agent,
and transcription with `?intent=transcription`), `/v1/realtime/translations` (the interpreter),
`/v1/mt`, and the agent's `GET /v1/pool` and
`GET /v1/usage`, `GET /metrics`, `POST /v1/realtime/client_secrets`, and the demo page at `/`."""

from __future__ import annotations

import functools
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse

from dragoman.config import Settings
from dragoman.sessions.base import CloseCode
from dragoman.transports.audio_transcriptions import audio_transcriptions_router
from dragoman.transports.client_secrets import client_secrets_router
from dragoman.transports.connections import apply_policy
from dragoman.transports.effective_session import effective_session
from dragoman.transports.llm_proxy import llm_proxy_router
from dragoman.transports.metrics import mount_metrics
from dragoman.transports.readiness import Readiness, mount
from dragoman.transports.remote_probes import RemoteProbes, remote_targets
from dragoman.transports.runtime import Runtime
from dragoman.transports.speech import speech_router
from dragoman.transports.web import mount_web
from dragoman.transports.webrtc import mount_webrtc
from dragoman.transports.webrtc.sideband import serve_sideband
from dragoman.transports.websocket.agent import serve_agent
from dragoman.transports.websocket.mt import mt_router
from dragoman.transports.websocket.realtime import refuse, serve_transcription
from dragoman.transports.websocket.translation import translation_endpoint


def create_app(settings: Settings) -> FastAPI:
    runtime = Runtime(settings)
    readiness = Readiness(runtime.start)
    app = mount(
        "dragoman",
        readiness,
        runtime.close,
        lambda: {
            "services": {
                "transcription": runtime.transcription is not None,
                "mt": runtime.mt is not None,
                "agent": runtime.agent is not None,
                "interpreter": runtime.interpreter is not None,
            },
            "engines": runtime.engines(),
            # The demo page offers these: the languages spoken to the interpreter, and into
            # (with the voice that speaks each).
            "interpreter_languages": (
                {
                    "sources": list(runtime.interpreter.languages.sources),
                    "targets": list(runtime.interpreter.languages.targets),
                    "voices": {
                        lang: runtime.interpreter.voice(lang)
                        for lang in runtime.interpreter.languages.targets
                    },
                }
                if runtime.interpreter is not None
                else None
            ),
        },
        remotes=RemoteProbes(remote_targets(settings)).health,
        host=settings.host,
        port=settings.port,
        services=settings.services,
    )
    app.state.runtime = runtime
    policy = apply_policy(app, settings)
    mount_metrics(app, runtime, policy.access, settings.max_connections)
    app.include_router(
        client_secrets_router(
            policy.client_secrets,
            settings.interpreter.language,
            lambda: runtime.interpreter.languages if runtime.interpreter is not None else None,
            functools.partial(effective_session, runtime),
        )
    )
    mount_web(app)

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
        intent = websocket.query_params.get("intent")
        if intent not in (None, "transcription"):
            await refuse(
                websocket,
                "unsupported_intent",
                f"Unknown intent {intent[:40]!r}: /v1/realtime serves the voice agent, and "
                "transcription with ?intent=transcription.",
            )
            return
        call_id = websocket.query_params.get("call_id")
        if call_id is not None:  # a server attaching to a WebRTC call's events (sideband)
            await serve_sideband(websocket, call_id)
            return
        transcription = intent == "transcription"
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
        if transcription:
            if runtime.transcription is None:
                await refuse(websocket, "service_unavailable", "Transcription is not enabled on this server.")
                return
            # The slot is taken before the first await, so concurrent handshakes cannot all pass.
            with runtime.transcription.session_slot() as admitted:
                if not admitted:
                    await refuse(
                        websocket,
                        "session_limit_reached",
                        f"The server is at its limit of {settings.transcription.max_sessions} "
                        "transcription sessions; try again later.",
                        close_code=CloseCode.TRY_AGAIN_LATER,
                    )
                    return
                await websocket.accept()
                await serve_transcription(websocket, runtime.transcription)
            return
        if runtime.agent is None:
            await refuse(
                websocket,
                "service_unavailable",
                "The voice agent is not enabled on this server; transcription is served on "
                "/v1/realtime?intent=transcription.",
            )
            return
        await serve_agent(websocket, runtime.agent)

    @app.websocket("/v1/realtime/translations")
    async def translations(websocket: WebSocket) -> None:
        # The interpreter: OpenAI's Realtime translation session (`?model=gpt-realtime-translate`).
        await translation_endpoint(websocket, runtime.interpreter, readiness)

    @app.get("/v1/pool")
    async def pool() -> JSONResponse:
        if runtime.agent is None:
            return _not_served("The voice agent is not enabled on this server.")
        return JSONResponse(runtime.agent.pool.snapshot())

    @app.get("/v1/usage")
    async def usage() -> JSONResponse:
        if runtime.agent is None:
            return _not_served("The voice agent is not enabled on this server.")
        return JSONResponse(runtime.agent.usage_report())

    if settings.agent.enable_llm_proxy:
        app.include_router(llm_proxy_router(settings.llm))

    # MT protocol v1; the standalone `dragoman mt-server` serves the same router at "/".
    app.include_router(mt_router(lambda: runtime.mt, path="/v1/mt", readiness=readiness))
    # The voice agent over WebRTC (`POST /v1/realtime/calls`), with the `webrtc` extra.
    mount_webrtc(app, lambda: runtime.agent, readiness, lambda: runtime.interpreter, settings.replica_id)
    files = settings.transcription.files
    app.include_router(audio_transcriptions_router(lambda: runtime.transcription, files, readiness))
    # OpenAI's text-to-speech, with the voices of the agent (or of the interpreter alone).
    speaking = speech_router(
        lambda: runtime.agent or runtime.interpreter, readiness, settings.engine_timeout_s
    )
    app.include_router(speaking)
    return app


def _not_served(message: str) -> JSONResponse:
    """OpenAI's error body, for a route whose service this server does not run."""
    body = {"error": {"type": "invalid_request_error", "code": "service_unavailable", "message": message}}
    return JSONResponse(body, status_code=404)
