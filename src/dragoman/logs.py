"""Structured logging: JSON lines (or console lines on a terminal) via structlog."""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, get_args

import structlog

from dragoman.errors import ServerError, new_error_id

#: Libraries whose debug records come per frame or per packet: at "debug" they stay at info, so
#: that a server logging its sessions' timelines is not slowed by its own log (websockets' frame
#: dumps, ~10 a second per interpreter session, made its end lags measurably longer); "trace"
#: lets them through too.
CHATTY_LIBRARIES = ("websockets", "aioice", "aiortc", "asyncio", "httpcore", "httpx", "urllib3")

#: The levels a server logs at, most verbose first.
LogLevel = Literal["trace", "debug", "info", "warning", "error"]
LEVELS: tuple[str, ...] = get_args(LogLevel)


def configure(level: LogLevel = "info", fmt: str = "auto") -> None:
    """Route stdlib and structlog records through one renderer.

    level is one of `LEVELS`: "trace" is "debug" with `CHATTY_LIBRARIES`' debug records too.
    fmt is "json", "console" or "auto" (console on a terminal, JSON otherwise).
    """
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if level == "trace" else level.upper())
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.INFO if level == "debug" else logging.NOTSET)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)


def log_failure(log: Any, event: str, exc: BaseException, **fields: Any) -> str:
    """Log an unexpected failure with its traceback and return the error id the client is given."""
    error_id = exc.error_id if isinstance(exc, ServerError) else new_error_id()
    log.error(event, error_id=error_id, error_type=type(exc).__name__, exc_info=exc, **fields)
    return error_id
