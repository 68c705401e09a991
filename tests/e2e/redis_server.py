"""A real `redis-server` (Debian's, `make redis`) on a free loopback port, for the tests of
what replicas share; no persistence, gone with its process."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Run redis-server until the block ends; yields its URL. Skips (loudly) without the binary."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (`make redis` installs Debian's): shared keys untested")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with (folder / "redis.log").open("wb") as log:
        process = subprocess.Popen(argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server did not start: {(folder / 'redis.log').read_text()[-2000:]}"
                )
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
