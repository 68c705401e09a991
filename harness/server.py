"""A real `python -m dragoman <command>` in a subprocess on a free loopback port.

The end-to-end tests and the benchmarks (bench/server.py) start servers with this.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Server:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def start(args: Sequence[str], log: Path, timeout: float = 300.0) -> Server:
    """Start `python -m dragoman <args>` on 127.0.0.1 and wait until /health answers 200."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    argv = [sys.executable, "-m", "dragoman", *args, "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as handle:
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            # A short drain by default, so that a SIGTERM with a session still open ends soon.
            env={"DRAGOMAN_DRAIN_SECONDS": "5", **os.environ, "DRAGOMAN_LOG_FORMAT": "json"},
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    server = Server(port, process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dragoman exited with {process.returncode}:\n{server.log_tail()}")
        try:  # 503 (still loading) raises HTTPError, an OSError
            with urllib.request.urlopen(server.http + "/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            time.sleep(0.3)
    stop(server)
    raise RuntimeError(f"dragoman did not become healthy in {timeout:g} s:\n{server.log_tail()}")


def stop(server: Server) -> None:
    """Terminate this server (and only it); kill it if it does not exit in time."""
    if server.process.poll() is not None:
        return
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
