"""A real `dragoman serve` on a free loopback port, shared by the end-to-end tests of a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.server import REPO, Server, start, stop

__all__ = ["REPO", "Server", "start_server", "stop_server"]

start_server = start
stop_server = stop


@pytest.fixture(scope="module")
def transcription_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("server") / "dragoman.log"
    server = start(["serve", "--services", "transcription"], log)
    yield server
    stop(server)
