"""The sessions a server runs now, so that a shutdown can tell each of them why it ends.

On SIGTERM the server stops accepting connections, then every running session is sent an
error event saying the server is going away and is closed with 1001, and the server waits
(bounded) for them to finish before it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import FastAPI
from starlette.websockets import WebSocket

from dragoman.config import Settings, read_api_keys
from dragoman.engines.workers import DEFAULT_CALL_TIMEOUT_S
from dragoman.logs import get_logger
from dragoman.transports.client_secrets import ClientSecretStore
from dragoman.transports.guard import AccessGuard, AccessStats
from dragoman.transports.real_time import RealTimeGuard
from dragoman.transports.secret_tokens import signing_key
from dragoman.transports.spent_keys import spent_keys
from dragoman.transports.websocket.channel import WebSocketChannel

log = get_logger(__name__)

#: How long a shutdown waits for the sessions to close.
SHUTDOWN_TIMEOUT_S = 10.0


class Stoppable(Protocol):
    def shut_down(self) -> None: ...


class Connections:
    def __init__(self) -> None:
        self._running: set[Any] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._running)

    @contextlib.contextmanager
    def track(self, driver: Stoppable) -> Iterator[None]:
        """Count `driver` as running for the block."""
        self._running.add(driver)
        self._idle.clear()
        try:
            yield
        finally:
            self._running.discard(driver)
            if not self._running:
                self._idle.set()

    async def shut_down(self) -> bool:
        """Close every session (1001, with an error event); True when all closed within
        SHUTDOWN_TIMEOUT_S."""
        if not self._running:
            return True
        log.info("closing sessions for shutdown", sessions=len(self._running))
        for driver in list(self._running):
            driver.shut_down()
        try:
            async with asyncio.timeout(SHUTDOWN_TIMEOUT_S):
                await self._idle.wait()
        except TimeoutError:
            log.warning("sessions still open at shutdown", sessions=len(self._running))
            return False
        return True


@dataclass(frozen=True)
class ConnectionPolicy:
    """What every WebSocket session of an app runs under (`app.state.policy`)."""

    connections: Connections = field(default_factory=Connections)
    max_message_bytes: int = 2 * 1024 * 1024
    idle_timeout_s: float | None = 300.0
    access: AccessStats = field(default_factory=AccessStats)
    #: The ephemeral keys minted by `POST /v1/realtime/client_secrets`, which the guard redeems.
    client_secrets: ClientSecretStore = field(default_factory=ClientSecretStore)
    #: An engine call that shows no life for this long fails its session's job (`engines/workers/`).
    engine_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S
    #: Who is live, and whose audio is too far ahead of real time to take.
    real_time: RealTimeGuard = field(default_factory=RealTimeGuard)

    @classmethod
    def of(cls, websocket: WebSocket) -> ConnectionPolicy:
        """The policy of the app serving `websocket` (the defaults for an app that sets none)."""
        policy = getattr(websocket.app.state, "policy", None)
        return policy if isinstance(policy, ConnectionPolicy) else _DEFAULT

    def channel(self, websocket: WebSocket) -> WebSocketChannel:
        return WebSocketChannel(websocket, max_bytes=self.max_message_bytes)


_DEFAULT = ConnectionPolicy()


def client_secret_store(settings: Settings) -> ClientSecretStore:
    """The ephemeral keys, signed with the replicas' shared key and spent in their shared
    record, where the settings name them."""
    key = settings.client_secret_key.get_secret_value() if settings.client_secret_key else None
    return ClientSecretStore(signing_key(key), spent_keys(settings.redis_url))


def apply_policy(app: FastAPI, settings: Settings) -> ConnectionPolicy:
    """Put `settings`' keys, connection limit, message size and idle timeout on `app`."""
    policy = ConnectionPolicy(
        Connections(),
        settings.max_message_bytes,
        settings.idle_timeout_s,
        engine_timeout_s=settings.engine_timeout_s,
        real_time=RealTimeGuard(settings.audio_burst_s),
        client_secrets=client_secret_store(settings),
    )
    app.state.policy = policy
    app.add_middleware(
        AccessGuard,
        api_keys=read_api_keys(settings),
        max_connections=settings.max_connections,
        stats=policy.access,
        client_secrets=policy.client_secrets,
    )
    return policy
