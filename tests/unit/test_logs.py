"""The log levels: "debug" is the server's own, "trace" the libraries' per-frame records too."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dragoman.logs import CHATTY_LIBRARIES, configure


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    configure("info")
    root.handlers[:], root.level = handlers, level


def enabled(name: str, level: int = logging.DEBUG) -> bool:
    return logging.getLogger(name).isEnabledFor(level)


def test_debug_is_the_servers_own_and_keeps_the_frame_dumps_out() -> None:
    configure("debug")
    assert enabled("dragoman.sessions.translation.session")
    assert enabled("llama.cpp")
    assert not enabled("websockets.server")  # a record per frame: it slowed the sessions
    assert enabled("websockets.server", logging.INFO)
    assert not any(enabled(f"{name}.child") for name in CHATTY_LIBRARIES)


def test_trace_lets_every_librarys_debug_through() -> None:
    configure("trace")
    assert enabled("websockets.server")
    assert all(enabled(name) for name in CHATTY_LIBRARIES)
    assert enabled("dragoman.transports.serve")


def test_info_after_debug_holds_everyone_at_info() -> None:
    configure("debug")
    configure("info")
    assert not enabled("dragoman.transports.serve")
    assert not enabled("websockets.server")
    assert enabled("websockets.server", logging.INFO)


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="trace, debug, info, warning, error"):
        configure("verbose")  # type: ignore[arg-type]
