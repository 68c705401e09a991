"""The openai SDK as the judge of Realtime events: its types check what the server writes,
and its own connection objects write what a client sends."""

from __future__ import annotations

import json
import typing
from typing import Any

import openai.types.beta.realtime as beta_types
import openai.types.realtime as ga_types
from openai.resources.beta.realtime.realtime import RealtimeConnection as BetaConnection
from openai.resources.realtime.realtime import RealtimeConnection
from pydantic import BaseModel

from dragoman.protocol.realtime.generation import Generation


def _by_type(union: Any) -> dict[str, type[BaseModel]]:
    """The members of an SDK event union, by the event type each declares."""
    (members, *_) = typing.get_args(union)  # Annotated[Union[...], PropertyInfo(discriminator="type")]
    return {typing.get_args(cls.model_fields["type"].annotation)[0]: cls for cls in typing.get_args(members)}


GA_EVENTS = _by_type(ga_types.RealtimeServerEvent)
BETA_EVENTS = _by_type(beta_types.RealtimeServerEvent)
#: What the server adds to OpenAI's session objects: the session's id and object (OpenAI's
#: servers send both, its SDK types declare neither), and this server's `mstar` extension.
SESSION_EXTRAS = frozenset({"id", "object", "mstar"})


def unknown_fields(value: Any, path: str = "") -> list[str]:
    """Fields the SDK's types do not declare, anywhere in a validated event."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        allowed = SESSION_EXTRAS if path == ".session" else frozenset()
        found += [f"{path}.{key}" for key in value.model_extra or {} if key not in allowed]
        for name in type(value).model_fields:
            found += unknown_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list):
        for index, element in enumerate(value):
            found += unknown_fields(element, f"{path}[{index}]")
    return found


def validate(event: dict[str, Any], generation: Generation) -> BaseModel:
    """The SDK's model of a server event; fails unless every field is the SDK's, in its type."""
    # Through JSON, as a client receives it.
    event = json.loads(json.dumps(event))
    if generation is Generation.BETA and event["type"].startswith("transcription_session."):
        return _beta_transcription_session(event)
    events = GA_EVENTS if generation is Generation.GA else BETA_EVENTS
    assert event["type"] in events, f"{generation.value} has no {event['type']!r} event"
    model = events[event["type"]].model_validate(event)
    assert unknown_fields(model) == [], unknown_fields(model)
    return model


def _beta_transcription_session(event: dict[str, Any]) -> BaseModel:
    """`transcription_session.updated` is the beta SDK's `TranscriptionSessionUpdatedEvent`; its
    union has no `.created`, whose session is checked as that event's session. Each field must
    be the SDK's (the `client_secret` it requires included), in its type."""
    assert "client_secret" in event["session"], "beta's TranscriptionSession requires a client_secret"
    model = beta_types.TranscriptionSessionUpdatedEvent.model_validate(
        {**event, "type": "transcription_session.updated"}
    )
    session = model.session
    fields = beta_types.TranscriptionSession.model_fields
    unknown = [key for key in session.model_extra or {} if key not in SESSION_EXTRAS]
    assert unknown == [], unknown
    assert set(event["session"]) - SESSION_EXTRAS <= set(fields)
    return model


class _Socket:
    """Stands in for the websocket under the SDK's connection objects; keeps what they send."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, data: str, *args: Any, **kwargs: Any) -> None:
        self.sent.append(data)

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing is received here")

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass


class Sent:
    """An SDK connection of either generation, and the frames it wrote."""

    def __init__(self, generation: Generation) -> None:
        self.socket = _Socket()
        self.conn: Any = (
            RealtimeConnection(self.socket)  # type: ignore[arg-type]
            if generation is Generation.GA
            else BetaConnection(self.socket)  # type: ignore[arg-type]
        )

    def last(self) -> str:
        return self.socket.sent[-1]
