"""`dragoman_errors_total` counts the errors a session says as the transport sends them: once
each, by code, whatever writes them; writing an error event (the wire model) counts nothing."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from dragoman.errors import EngineFailure, InvalidValue, ServerError
from dragoman.logs import get_logger
from dragoman.protocol.realtime.generation import Generation
from dragoman.protocol.realtime.server_events import wire_event
from dragoman.sessions.speech import events as speech
from dragoman.transports.outbox import Outbox


def errors(code: str) -> float:
    return REGISTRY.get_sample_value("dragoman_errors_total", {"code": code}) or 0.0


class Said:
    """A session that has said `events`."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    def events_to_send(self) -> list[Any]:
        events, self.events = self.events, []
        return events


class Codec:
    """Writes an event's repr; an event that is the string "bug" breaks the writer."""

    def write(self, event: Any) -> str:
        if event == "bug":
            raise RuntimeError("codec bug")
        return repr(event)

    def failure(self, error: ServerError, event: Any) -> Any:
        return speech.Error(error)


def outbox(session: Said) -> Outbox[Any, Any]:
    return Outbox(
        session,  # type: ignore[arg-type]
        channel=None,  # type: ignore[arg-type]
        codec=Codec(),  # type: ignore[arg-type]
        log=get_logger("test"),
        send_limit=16,
        tag=lambda event: None,
        on_full=lambda: None,
    )


def test_each_error_said_is_counted_once_by_its_code_as_it_is_sent() -> None:
    refused = InvalidValue("speed must be between 0.25 and 1.5.", param="session.audio.output.speed")
    crash = EngineFailure("decoder crashed")
    invalid, engine = errors(refused.code), errors(crash.code)
    box = outbox(Said([speech.Error(refused), speech.Failed("item_1", crash), speech.Cleared(), "bug"]))
    box.flush()
    assert errors(refused.code) == invalid + 1
    # The failed item, and the event the codec could not write, sent as an engine failure.
    assert errors(crash.code) == engine + 2
    assert len(box.queue) == 4


def test_writing_an_error_event_counts_nothing() -> None:
    error = InvalidValue("bad value")
    before = errors(error.code)
    wire_event(speech.Error(error), Generation.GA)
    assert errors(error.code) == before
