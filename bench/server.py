"""A real `dragoman serve` in a subprocess on a free loopback port, for the load benchmarks.

The harness is the end-to-end tests' (`harness/server.py`); this adds the context manager.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.server import Server, start, stop


def websocket_url(http_url: str) -> str:
    """A server's WebSocket base URL from its HTTP one: http -> ws, https -> wss."""
    return "ws" + http_url.removeprefix("http")


@contextmanager
def running(args: Sequence[str], log: Path) -> Iterator[Server]:
    server = start(args, log)
    try:
        yield server
    finally:
        stop(server)


def add_asr_route_option(parser: argparse.ArgumentParser) -> None:
    """`--asr-route LANG=BACKEND` (repeatable): the started server's ASR routes."""
    parser.add_argument(
        "--asr-route",
        action="append",
        default=[],
        metavar="LANG=BACKEND",
        help="the server's ASR routes (`dragoman serve --asr-route`), e.g. en=moonshine",
    )


def asr_route_flags(routes: Sequence[str]) -> list[str]:
    """`dragoman serve`'s flags for the routes."""
    return [flag for route in routes for flag in ("--asr-route", route)]


def asr_route_label(routes: Sequence[str]) -> str:
    """What a goal's name adds for a server with routes, so that its results stay apart from the
    defaults' (", ASR en=moonshine")."""
    return "".join(f", ASR {route}" for route in routes)
