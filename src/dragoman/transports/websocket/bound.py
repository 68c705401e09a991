"""A session opened with an ephemeral key starts with the config the key was minted with.

`POST /v1/realtime/client_secrets` binds a session object to the key; the access guard
puts it on the connection (`state.session_config`). It is the session's own
`session.update`, applied before the first client event, and `session.created` shows
its result, as OpenAI's does: the client sees one `session.created` with the bound
settings, not the defaults and then an update. Should the session refuse the bound
config (a voice this server lacks), the client is sent the defaults' `session.created`
and the refusal's `error`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Generic, Protocol, TypeVar

from starlette.requests import HTTPConnection

from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.base import DEFAULT_LANE, Job, Session
from dragoman.transports.adapters import Frame

ClientEventT = TypeVar("ClientEventT")
ServerEventT = TypeVar("ServerEventT")
JobT = TypeVar("JobT", bound=Job)
ResultT = TypeVar("ResultT")
ParsedT = TypeVar("ParsedT", covariant=True)


class Parser(Protocol[ParsedT]):
    generation: Generation

    def parse(self, raw: Frame) -> ParsedT: ...


def bound_config(connection: HTTPConnection) -> dict[str, Any] | None:
    """The session object bound to the ephemeral key that opened `connection`, if one did."""
    config = getattr(connection.state, "session_config", None)
    return config if isinstance(config, dict) else None


def bound_client_secret(connection: HTTPConnection) -> dict[str, Any] | None:
    """`{"value", "expires_at"}` of the ephemeral key that opened `connection`, if one did."""
    secret = getattr(connection.state, "client_secret", None)
    return secret if isinstance(secret, dict) else None


class BoundStart(Generic[ClientEventT, ServerEventT, JobT, ResultT]):
    """`session`, whose first events are those of its start with the bound config applied.

    Every call but the first `events_to_send` goes straight to the session, and so does
    any other attribute the driver reads.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def __init__(self, session: Any, first: list[ServerEventT]) -> None:
        self.session = session
        self.session_id: str = session.session_id
        self._first: list[ServerEventT] | None = first

    def receive(self, event: ClientEventT) -> None:
        self.session.receive(event)

    def events_to_send(self) -> list[ServerEventT]:
        first, self._first = self._first or [], None
        events: list[ServerEventT] = self.session.events_to_send()
        return first + events

    def next_job(self, lane: str = DEFAULT_LANE) -> JobT | None:
        job: JobT | None = self.session.next_job(lane)
        return job

    def job_progress(self, job: JobT, piece: Any) -> None:
        self.session.job_progress(job, piece)

    def job_done(self, job: JobT, result: ResultT) -> None:
        self.session.job_done(job, result)

    def job_failed(self, job: JobT, error: Any) -> None:
        self.session.job_failed(job, error)

    @property
    def close_code(self) -> int | None:
        code: int | None = self.session.close_code
        return code


def start_bound(
    session: Session[ClientEventT, ServerEventT, JobT, ResultT],
    parser: Parser[ClientEventT],
    config: dict[str, Any] | None,
    configured: type,
) -> Session[ClientEventT, ServerEventT, JobT, ResultT]:
    """`session` started with `config` (a GA session object), or itself when there is none.

    `configured` is the session's `SessionConfigured` event type (a frozen dataclass with
    `created`): the update's answer is sent as the `created` it replaces. The config is GA's
    shape whatever the client speaks, so the parser keeps the client's generation."""
    if config is None:
        return session
    created = session.events_to_send()
    generation = parser.generation
    update = parser.parse(json.dumps({"type": "session.update", "session": config}))
    parser.generation = generation
    session.receive(update)
    answer = session.events_to_send()
    if len(answer) == 1 and isinstance(answer[0], configured):
        first = [dataclasses.replace(answer[0], created=True)]  # type: ignore[type-var]
    else:
        first = created + answer
    bound: Session[ClientEventT, ServerEventT, JobT, ResultT] = BoundStart(session, first)
    return bound
