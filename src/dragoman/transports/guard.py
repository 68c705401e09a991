"""Who may connect: API keys and the connection limit, checked before any route runs.

An ASGI middleware, so that it covers every HTTP and WebSocket endpoint alike (the
Realtime and MT WebSockets, `/v1/models`, the pool, usage and metrics endpoints, the LLM
proxy); `GET /health` stays open for load balancers and orchestrators, and the demo page
(`GET /`, `/static/…`) for browsers, which cannot send a key with a page load.

- Keys: `Authorization: Bearer KEY`, which the `openai` SDK sends. Browsers cannot set
  headers on a WebSocket, so a WebSocket may also name the key as a subprotocol, as
  OpenAI's browser clients do: `Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.KEY`.
  Keys are compared in constant time, against every configured key.
- Ephemeral keys (`ek_…`, minted by `POST /v1/realtime/client_secrets`,
  `client_secrets.py`) open one session each, before they expire: any WebSocket, or a
  WebRTC call (`POST /v1/realtime/calls`). Such a key is spent by the connection it
  opens, and its bound session config goes to the route as `state.session_config`
  (`request.state` / `websocket.state`), with `state.client_secret` (`value`,
  `expires_at`). An `ek_` key that is unknown, spent or expired is refused even on a
  server without keys: its holder expects a config that would not be applied. Minting
  needs a long-lived key when the server has keys, and is open when it has none.
- A browser's WebSocket fails unless the server picks one of the subprotocols it
  offered; for a client that sent its key as one, the first other protocol it offered
  (`realtime`) is picked unless the route picked one. The key itself is never echoed.
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

from dragoman.errors import ServerError, with_error_id
from dragoman.logs import get_logger, log_failure
from dragoman.metrics import REFUSALS
from dragoman.transports.client_secrets import ClientSecret, ClientSecretStore
from dragoman.transports.secret_tokens import PREFIX

log = get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The subprotocol prefix OpenAI's browser clients carry the key in.
KEY_SUBPROTOCOL = "openai-insecure-api-key."
#: Paths served to anyone: health, and the demo page, which asks for a key itself.
OPEN_PATHS = frozenset({"/health", "/", "/favicon.ico"})
OPEN_PREFIXES = ("/static/",)
#: The HTTP requests an ephemeral key may make (besides every WebSocket): setting up a WebRTC call.
EPHEMERAL_HTTP = frozenset({("POST", "/v1/realtime/calls"), ("POST", "/v1/realtime/translations/calls")})
SPENT_MESSAGE = "The client secret is unknown, expired or already used; mint a new one."


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


def offered_subprotocols(scope: Scope) -> list[str]:
    return [p.strip() for p in _header(scope, b"sec-websocket-protocol").split(",") if p.strip()]


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
        client_secrets: ClientSecretStore | None = None,
    ) -> None:
        self.app = app
        self.client_secrets = client_secrets
        self.api_keys = tuple(api_keys)
        self.max_connections = max_connections
        self.stats = stats or AccessStats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] not in ("http", "websocket") or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        presented = presented_keys(scope)
        ephemeral = [key for key in presented if key.startswith(PREFIX)]
        secret: ClientSecret | None = None
        if ephemeral and self._takes_ephemeral(scope):
            secret = self.client_secrets.peek(ephemeral[0]) if self.client_secrets is not None else None
            if secret is None:
                await self._refuse(
                    scope,
                    send,
                    401,
                    "invalid_api_key",
                    SPENT_MESSAGE,
                )
                return
        elif self.api_keys and not key_matches(presented, self.api_keys):
            await self._refuse(
                scope,
                send,
                401,
                "invalid_api_key",
                "A valid API key is required: send 'Authorization: Bearer KEY'.",
            )
            return
        if scope["type"] == "http":
            if await self._spend(scope, send, secret):
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
        if not await self._spend(scope, send, secret):
            return
        if any(p.startswith(KEY_SUBPROTOCOL) for p in offered_subprotocols(scope)):
            send = _picking_subprotocol(scope, send)
        self.stats.connections += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.stats.connections -= 1

    def _takes_ephemeral(self, scope: Scope) -> bool:
        return scope["type"] == "websocket" or (scope.get("method"), scope.get("path")) in EPHEMERAL_HTTP

    async def _spend(self, scope: Scope, send: Send, secret: ClientSecret | None) -> bool:
        """Redeem the ephemeral key (only now, once nothing else refuses the connection) and
        hand its session to the route; False when it was refused instead (the key was spent
        meanwhile, on this replica or another, or the shared record is down)."""
        if secret is None or self.client_secrets is None:
            return True
        try:
            redeemed = await self.client_secrets.redeem(secret.value)
        except ServerError as exc:
            error_id = log_failure(log, "spending an ephemeral key failed", exc)
            message = with_error_id("The server cannot check ephemeral keys now; try again later", error_id)
            await self._refuse(scope, send, 503, exc.code, message)
            return False
        if redeemed is None:
            await self._refuse(scope, send, 401, "invalid_api_key", SPENT_MESSAGE)
            return False
        state = scope.setdefault("state", {})
        state["session_config"] = redeemed.session
        state["client_secret"] = redeemed.wire()
        return True

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


def _picking_subprotocol(scope: Scope, send: Send) -> Send:
    """`send`, with the accept naming the first protocol the client offered besides its key."""
    others = [p for p in offered_subprotocols(scope) if not p.startswith(KEY_SUBPROTOCOL)]

    async def picking(message: Message) -> None:
        if message["type"] == "websocket.accept" and not message.get("subprotocol") and others:
            message = {**message, "subprotocol": others[0]}
        await send(message)

    return picking
