"""At shutdown an engine that fails to close is logged, with an error id, and the rest still close."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from dragoman.transports import services
from dragoman.transports.services import MTService, close_engine

if TYPE_CHECKING:
    from collections.abc import Callable

    from dragoman.engines.mt.base import MTEngine


class RecordingLog:
    """Stands in for the module's structlog logger: keeps what `log_failure` reports."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, dict[str, Any]]] = []

    def error(self, event: str, **fields: Any) -> None:
        self.errors.append((event, fields))


class FailingEngine:
    def close(self) -> None:
        raise RuntimeError("the model file vanished")


def test_a_failed_close_is_logged_with_an_error_id(monkeypatch: pytest.MonkeyPatch) -> None:
    log = RecordingLog()
    monkeypatch.setattr(services, "log", log)
    closed: list[str] = []
    close_engine("llm", FailingEngine().close)
    close_engine("tts", lambda: closed.append("tts"))
    assert closed == ["tts"]
    [(event, fields)] = log.errors
    assert event == "engine close failed" and fields["role"] == "llm"
    assert fields["error_id"].startswith("err_") and isinstance(fields["exc_info"], RuntimeError)


async def test_the_mt_service_logs_its_engines_failed_close(monkeypatch: pytest.MonkeyPatch) -> None:
    log = RecordingLog()
    monkeypatch.setattr(services, "log", log)
    factory = cast("Callable[[], MTEngine]", FailingEngine)  # a stand-in: only its close() is called
    service = MTService(factory, default_preset="fast", max_sessions=1, max_utterance_words=60)
    service.engine = FailingEngine()  # type: ignore[assignment]
    await service.close()
    assert service.engine is None
    assert [event for event, _ in log.errors] == ["engine close failed"]
