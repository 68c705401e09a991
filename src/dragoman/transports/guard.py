"""Who may connect: API keys and the connection limit, checked before any route runs.

An ASGI middleware, so that it covers every HTTP and WebSocket endpoint alike (the
Realtime and MT WebSockets, `/v1/models`, the pool, usage and metrics endpoints, the LLM
proxy); `GET /health` stays open for load balancers and orchestrators.

- Keys: `Authorization: Bearer KEY`, which the `openai` SDK sends. Browsers cannot set
  headers on a WebSocket, so a WebSocket may also name the key as a subprotocol, as
  OpenAI's browser clients do: `Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.KEY`.
  Keys are compared in constant time, against every configured key.
- A refusal comes before the WebSocket upgrade, as an HTTP response with OpenAI's JSON
  error body (ASGI's WebSocket denial response): 401 for a missing or wrong key, 503 with
  `Retry-After` past the connection limit. A server without the denial extension closes
  the handshake instead (HTTP 403).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from dragoman.logs import get_logger
from dragoman.metrics import REFUSALS

log = get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The subprotocol prefix OpenAI's browser clients carry the key in.
KEY_SUBPROTOCOL = "openai-insecure-api-key."
#: Paths served to anyone.
OPEN_PATHS = frozenset({"/health"})


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


def presented_keys(scope: Scope) -> list[str]:
    """The keys a request carries: its bearer token, and for a WebSocket its key subprotocol."""
    found = []
    authorization = _header(scope, b"authorization")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        found.append(token.strip())
    if scope["type"] == "websocket":
        for protocol in _header(scope, b"sec-websocket-protocol").split(","):
            protocol = protocol.strip()
            if protocol.startswith(KEY_SUBPROTOCOL):
                found.append(protocol[len(KEY_SUBPROTOCOL) :])
    return found


def key_matches(presented: Sequence[str], keys: Sequence[str]) -> bool:
    """Constant-time: every presented key is compared with every configured one."""
    matched = False
    for candidate in presented:
        for key in keys:
            matched |= hmac.compare_digest(candidate.encode(), key.encode())
    return matched


@dataclass
class AccessStats:
    """What the guard sees, for the metrics."""

    #: WebSocket connections open now.
    connections: int = 0


class AccessGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        api_keys: Sequence[str],
        max_connections: int,
        stats: AccessStats | None = None,
    ) -> None:
        self.app = app
        self.api_keys = tuple(api_keys)
        self.max_connections = max_connections
        self.stats = stats or AccessStats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if self.api_keys and not key_matches(presented_keys(scope), self.api_keys):
            await self._refuse(
                scope,
                send,
                401,
                "invalid_api_key",
                "A valid API key is required: send 'Authorization: Bearer KEY'.",
            )
            return
        if scope["type"] == "http":
            await self.app(scope, receive, send)
            return
        if self.stats.connections >= self.max_connections:
            await self._refuse(
                scope,
                send,
                503,
                "too_many_connections",
                f"The server holds its limit of {self.max_connections} connections; try again later.",
            )
            return
        self.stats.connections += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.stats.connections -= 1

    async def _refuse(self, scope: Scope, send: Send, status: int, code: str, message: str) -> None:
        REFUSALS.labels(code).inc()
        log.info("request refused", path=scope.get("path"), status=status, code=code)
        kind = "invalid_request_error" if status < 500 else "server_error"
        body = json.dumps({"error": {"type": kind, "code": code, "message": message, "param": None}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if status == 503:
            headers.append((b"retry-after", b"5"))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        elif "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
