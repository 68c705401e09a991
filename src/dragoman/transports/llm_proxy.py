"""The LLM proxy (`--enable-llm-proxy`, off by default): the agent's remote LLM as plain endpoints.

With a remote backend, the reference agent "exposes the configured remote LLM as an
ordinary OpenAI-compatible endpoint: `POST /v1/chat/completions` with the
chat-completions backend, `POST /v1/responses` with the responses backend"; with a
local one it answers 501 with the reason. Requests are passed through as they are,
streamed or not, with this server's upstream key in place of the client's.

Access is the server's (`guard.py`): on a server with API keys these routes need one, as
every route does; on one without keys they are open. Nothing rate-limits them, so the
upstream's quota is spent by whoever may call them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from dragoman.config import LLMSettings
from dragoman.logs import get_logger, log_failure

log = get_logger(__name__)

#: The backend whose upstream each path reaches.
PATHS = {"chat-completions": "/chat/completions", "responses": "/responses"}
#: Headers of the upstream's answer that are passed back.
_PASSED_BACK = ("content-type", "cache-control", "openai-processing-ms", "x-request-id")


def _error(status: int, code: str, message: str) -> JSONResponse:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return JSONResponse({"error": {"type": kind, "code": code, "message": message}}, status_code=status)


def llm_proxy_router(settings: LLMSettings) -> APIRouter:
    router = APIRouter()
    upstream = PATHS.get(settings.backend)
    client = httpx.AsyncClient(timeout=httpx.Timeout(settings.timeout_s, connect=10.0))

    async def proxy(request: Request, path: str) -> Response:
        if upstream is None:
            return _error(
                501,
                "llm_proxy_needs_remote_backend",
                f"The LLM proxy passes requests to a remote backend (--llm-backend chat-completions "
                f"or responses); this server runs the {settings.backend!r} backend in-process.",
            )
        if path != upstream:
            served = "/v1" + upstream
            return _error(
                404, "not_served", f"With the {settings.backend!r} backend the proxy serves {served}."
            )
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        if settings.api_key:
            headers["authorization"] = f"Bearer {settings.api_key}"
        outgoing = client.build_request(
            "POST", settings.base_url.rstrip("/") + path, content=await request.body(), headers=headers
        )
        try:
            answer = await client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            error_id = log_failure(log, "llm proxy upstream failed", exc)
            return _error(
                502, "upstream_unavailable", f"The upstream LLM server did not answer (error id {error_id})."
            )

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()

        passed = {key: value for key, value in answer.headers.items() if key.lower() in _PASSED_BACK}
        return StreamingResponse(body(), status_code=answer.status_code, headers=passed)

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await proxy(request, "/chat/completions")

    @router.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await proxy(request, "/responses")

    return router
