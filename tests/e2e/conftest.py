"""A real `dragoman serve` on a free loopback port, shared by the end-to-end tests of a module."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
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

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start_server(args: list[str], log: Path, timeout: float = 300.0) -> Server:
    port = free_port()
    env = {**os.environ, "DRAGOMAN_LOG_FORMAT": "json"}
    handle = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "dragoman", *args, "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    server = Server(port, process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dragoman exited with {process.returncode}:\n{server.log_text()[-4000:]}")
        try:
            with urllib.request.urlopen(server.http + "/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            time.sleep(0.3)
    stop_server(server)
    raise RuntimeError(f"dragoman did not become healthy in {timeout} s:\n{server.log_text()[-4000:]}")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def transcription_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("server") / "dragoman.log"
    server = start_server(["serve", "--services", "transcription"], log)
    yield server
    stop_server(server)
