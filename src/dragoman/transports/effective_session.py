"""The session an ephemeral key opens, as that session's `session.created` will show it.

OpenAI answers `POST /v1/realtime/client_secrets` with the effective session
(`RealtimeSessionCreateResponse` / `RealtimeTranscriptionSessionCreateResponse`): the
request's settings with the server's defaults filled in, each field in its full shape. A
lenient read of the request (`turn_detection: {}`, which the session takes as server VAD)
echoed back would break the SDK's types. So the answer is made by the session machine
itself: a new session of the service the key is for starts with the bound config, exactly
as the connection that spends the key will start it (`websocket/bound.py`), and its first
`session.created` is the answer. A config that session refuses (a voice this server lacks)
is refused here, when the key is minted, not when it is spent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from dragoman.errors import ClientError
from dragoman.protocol.realtime.agent_events import agent_wire_event
from dragoman.protocol.realtime.client_parsers import AgentClientParser, ClientParser
from dragoman.protocol.realtime.generation import GA_RATE, Generation
from dragoman.protocol.realtime.server_events import wire_event
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.session import AgentJob, AgentResult
from dragoman.sessions.base import Session
from dragoman.sessions.speech.events import Error
from dragoman.sessions.transcription import events as transcription
from dragoman.transports.runtime import Runtime
from dragoman.transports.websocket.bound import start_bound


def effective_session(runtime: Runtime, session: dict[str, Any]) -> dict[str, Any] | None:
    """The GA session object a key bound to `session` (a checked GA session object) opens; None
    when its service is not serving (disabled, or still loading: the key is minted as asked).
    Raises ClientError when the session refuses the config."""
    session_id = "sess_" + uuid.uuid4().hex[:20]
    if session.get("type") == "transcription":
        service = runtime.transcription
        if service is None:
            return None
        started = start_bound(
            service.new_session(session_id, Generation.GA),
            ClientParser(Generation.GA),
            session,
            transcription.SessionConfigured,
        )
        return _created(started.events_to_send(), lambda event: wire_event(event, Generation.GA))
    agent_service = runtime.agent
    if agent_service is None:
        return None
    opened = agent_service.new_session(session_id, GA_RATE)
    try:
        started_agent: Session[agent.ClientEvent, agent.ServerEvent, AgentJob, AgentResult] = start_bound(
            opened, AgentClientParser(Generation.GA), session, agent.SessionConfigured
        )
        return _created(started_agent.events_to_send(), lambda event: agent_wire_event(event, Generation.GA))
    finally:
        opened.close()


def _created(events: list[Any], wire: Callable[[Any], dict[str, Any] | None]) -> dict[str, Any]:
    """The session object of the first events' `session.created`; the first refusal among
    them raised."""
    for event in events:
        if isinstance(event, Error) and isinstance(event.error, ClientError):
            raise event.error
    for event in events:
        if isinstance(event, (transcription.SessionConfigured, agent.SessionConfigured)):
            written = wire(event)
            assert written is not None, "session.created is written in every generation"
            return dict(written["session"])
    raise AssertionError("a session starts with session.created")
