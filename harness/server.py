"""A real `python -m dragoman <command>` in a subprocess on a free loopback port.

The end-to-end tests and the benchmarks (bench/server.py) start servers with this.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.subprocess_server import answers, free_port, launch, terminate, wait_ready

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
    port = free_port()
    argv = [sys.executable, "-m", "dragoman", *args, "--host", "127.0.0.1", "--port", str(port)]
    # A short drain by default, so that a SIGTERM with a session still open ends soon.
    env = {"DRAGOMAN_DRAIN_SECONDS": "5", **os.environ, "DRAGOMAN_LOG_FORMAT": "json"}
    server = Server(port, launch(argv, log, env, cwd=REPO), log)
    try:  # /health answers 503 while the engines load
        wait_ready("dragoman", server.process, lambda: answers(server.http + "/health"), timeout, [log])
    except BaseException:
        stop(server)
        raise
    return server


def stop(server: Server) -> None:
    """Terminate this server (and only it); kill it if it does not exit in time."""
    terminate(server.process, grace=20)
