"""A real `dragoman serve` in a subprocess on a free loopback port, for the load benchmarks.

The harness is the end-to-end tests' (`harness/server.py`); this adds the context manager.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.server import Server, start, stop


@contextmanager
def running(args: Sequence[str], log: Path) -> Iterator[Server]:
    server = start(args, log)
    try:
        yield server
    finally:
        stop(server)
