"""Running an app under uvicorn: the one place that binds the listening socket.

On SIGTERM the server drains, as a rolling update needs: `/health` answers 503 `draining`
(the load balancer takes the replica out), new sessions are refused as while loading, and
the open ones run on until they end or `drain_seconds` pass. Then (or at once, on Ctrl-C or a
second SIGTERM) the server stops accepting connections, tells every running session why it
ends and closes it with 1001 (going away), waits for them (bounded by
`connections.SHUTDOWN_TIMEOUT_S`), and only then lets uvicorn finish.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import time
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from dragoman.config import Settings, read_api_keys
from dragoman.logs import get_logger
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.readiness import Readiness, State

log = get_logger(__name__)


class _Server(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        policy: ConnectionPolicy | None,
        readiness: Readiness,
        drain_seconds: float,
    ) -> None:
        super().__init__(config)
        self.policy = policy
        self.readiness = readiness
        self.drain_seconds = drain_seconds
        self._draining_since: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """SIGTERM starts a drain; SIGINT, or a SIGTERM during one, stops at once, as before."""
        if sig == signal.SIGTERM and self._draining_since is None and self.drain_seconds > 0:
            self._draining_since = time.monotonic()
            self.readiness.drain()
            sessions = len(self.policy.connections) if self.policy is not None else 0
            log.info("draining for shutdown", seconds=self.drain_seconds, sessions=sessions)
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        # Polled every 0.1 s by uvicorn's main loop: a drain ends when its sessions have, or at its deadline.
        if self._draining_since is not None and not self.should_exit:
            open_sessions = len(self.policy.connections) if self.policy is not None else 0
            overdue = time.monotonic() - self._draining_since >= self.drain_seconds
            if overdue or not open_sessions:
                log.info("drain over", sessions=open_sessions, deadline_reached=overdue)
                self.should_exit = True
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connections while the running ones are closed
        if self.policy is not None:
            await self.policy.connections.shut_down()
            await self.policy.client_secrets.spent.close()
        await super().shutdown(sockets)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(app: FastAPI, settings: Settings) -> int:
    """Serve `app` until stopped; exit status 1 when its engines failed to load."""
    if not read_api_keys(settings) and not _loopback(settings.host):
        log.warning(
            "serving without API keys on a non-loopback address: anyone who can reach "
            f"{settings.host}:{settings.port} can use every endpoint; set --api-key or --api-keys-file",
            host=settings.host,
        )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        # The websockets library's Sans-I/O protocol under uvicorn's own I/O (its legacy
        # asyncio implementation is deprecated and warns at every start).
        ws="websockets-sansio",
        # The protocol library's own cap, above the app's (which answers with an error event).
        ws_max_size=2 * settings.max_message_bytes,
    )
    policy: Any = getattr(app.state, "policy", None)
    readiness: Readiness = app.state.readiness
    server = _Server(
        config, policy if isinstance(policy, ConnectionPolicy) else None, readiness, settings.drain_seconds
    )

    def stop() -> None:
        server.should_exit = True

    readiness.on_failure = stop
    server.run()
    return 1 if readiness.state is State.FAILED else 0
