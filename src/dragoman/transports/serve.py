"""Running an app under uvicorn: the one place that binds the listening socket.

On SIGTERM (or Ctrl-C) the server stops accepting connections, tells every running
session why it ends and closes it with 1001 (going away), waits for them (bounded by
`connections.SHUTDOWN_TIMEOUT_S`), and only then lets uvicorn finish.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import uvicorn
from fastapi import FastAPI

from dragoman.config import Settings, read_api_keys
from dragoman.logs import get_logger
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.readiness import Readiness, State

log = get_logger(__name__)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, policy: ConnectionPolicy | None) -> None:
        super().__init__(config)
        self.policy = policy

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connections while the running ones are closed
        if self.policy is not None:
            await self.policy.connections.shut_down()
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
        ws="websockets",
        # The protocol library's own cap, above the app's (which answers with an error event).
        ws_max_size=2 * settings.max_message_bytes,
    )
    policy: Any = getattr(app.state, "policy", None)
    server = _Server(config, policy if isinstance(policy, ConnectionPolicy) else None)
    readiness: Readiness = app.state.readiness

    def stop() -> None:
        server.should_exit = True

    readiness.on_failure = stop
    server.run()
    return 1 if readiness.state is State.FAILED else 0
