"""A real `redis-server` (Debian's, `make redis`) on a free loopback port, for the tests of
what replicas share; no persistence, gone with its process."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.subprocess_server import free_port as free_port
from harness.subprocess_server import serving


def pong(port: int) -> bool:
    """Whether a redis on `port` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Run redis-server until the block ends; yields its URL. Skips (loudly) without the binary."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (`make redis` installs Debian's): shared keys untested")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    log = folder / "redis.log"
    with serving("redis-server", argv, log, lambda: pong(port), 20, grace=10, interval=0.1, cwd=folder):
        yield f"redis://127.0.0.1:{port}/0"
