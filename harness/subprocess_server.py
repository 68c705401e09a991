"""A real server in a subprocess on a free loopback port: start it, wait until it answers, stop it.

Every server the tests and benchmarks run (dragoman itself in `server.py`, `llama_cpp.server`,
LiteLLM's proxy, nginx, redis-server) has the same life: its output goes to a log, it is
ready when a probe says so (or has failed when it exits first, or a deadline passes: either
raises with the tail of its logs), and it ends with a SIGTERM, then a SIGKILL if it ignores it.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A loopback port nothing listens on now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether `url` answers 200; an error status (a 503 while loading, a 502 from a proxy
    whose upstream is not up yet) raises HTTPError, an OSError, as a refused connection does."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def tail(logs: Sequence[Path], chars: int = 3000) -> str:
    """The end of each log that exists, in order."""
    return "\n".join(log.read_text(errors="replace")[-chars:] for log in logs if log.exists())


def launch(
    argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv`, its stdout and stderr both into `log`."""
    with log.open("wb") as handle:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )


def wait_ready(
    name: str,
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    timeout: float,
    logs: Sequence[Path],
    interval: float = 0.3,
    becoming: str = "become ready",
) -> None:
    """Return once `ready()` holds; raise, with the tail of `logs`, if `process` exits first or
    `timeout` seconds pass. `becoming` says what was awaited, for the error."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail(logs)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not {becoming} in {timeout:g} s:\n{tail(logs)}")
        time.sleep(interval)


def terminate(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM this process (and only it); SIGKILL it if it has not exited after `grace` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def serving(
    name: str,
    argv: Sequence[str],
    log: Path,
    ready: Callable[[], bool],
    timeout: float,
    *,
    grace: float,
    interval: float = 0.3,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    logs: Sequence[Path] = (),
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `argv` until the block ends, once `ready()` holds (see `wait_ready`); `logs` are
    tailed in an error after `log`, its output."""
    process = launch(argv, log, env, cwd)
    try:
        wait_ready(name, process, ready, timeout, [log, *logs], interval)
        yield process
    finally:
        terminate(process, grace)
