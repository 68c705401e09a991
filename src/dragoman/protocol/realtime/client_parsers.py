"""A Realtime connection's client frames, parsed into its session's input events.

`ClientParser` and `AgentClientParser` parse one connection's frames into the
session's input events (`sessions.transcription.events`, `sessions.agent.events`);
everything about the wire is checked here (with the event models of
`protocol.realtime.client_events`), and what needs the session's state
(the item cap, an empty buffer, a known call id) there. A bad frame becomes the
session's `Rejected` event with `InvalidEvent` (not an event we serve: bad JSON, no
type, an unknown type) or `InvalidValue` (a field is wrong, `param` its path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from dragoman.errors import ClientError, InvalidEvent, InvalidValue
from dragoman.protocol.json_frames import BadJSON, load_json
from dragoman.protocol.realtime.client_events import (
    AgentSessionUpdate,
    BetaAgentSessionUpdate,
    BetaTranscriptionSessionUpdate,
    ConversationItemCreate,
    ConversationItemDelete,
    ConversationItemRetrieve,
    ConversationItemTruncate,
    InputAudioBufferAppend,
    InputAudioBufferClear,
    InputAudioBufferCommit,
    OutputAudioBufferClear,
    ResponseCancel,
    ResponseCreate,
    TranscriptionSessionUpdate,
)
from dragoman.protocol.realtime.fields import MAX_EVENT_ID_CHARS, ClientModel, invalid
from dragoman.protocol.realtime.generation import Generation, default_input_rate, format_for, generation_of
from dragoman.sessions.agent import events as agent
from dragoman.sessions.transcription import events as transcription

__all__ = [
    "AgentClientParser",
    "ClientParser",
    "Generation",
    "default_input_rate",
    "format_for",
    "generation_of",
]

#: The reference voice agent's error code for a frame it cannot take.
UNKNOWN_OR_INVALID_EVENT = "unknown_or_invalid_event"
EventT = TypeVar("EventT")
ModelT = TypeVar("ModelT", bound=ClientModel)


def _parse(
    raw: str | bytes,
    event: Callable[[str, str | None, dict[str, Any]], EventT],
    rejected: Callable[[ClientError, str | None], EventT],
) -> EventT:
    """The session event in a frame, or the session's `Rejected` (this never raises ClientError)."""
    if not isinstance(raw, str):
        return rejected(InvalidEvent("Events must be JSON text frames, not binary."), None)
    try:
        kind, event_id, data = _envelope(raw)
    except ClientError as exc:
        return rejected(exc, None)
    try:
        return event(kind, event_id, data)
    except ClientError as exc:
        return rejected(exc, event_id)


def _envelope(raw: str) -> tuple[str, str | None, dict[str, Any]]:
    """The event's type, its event_id and the whole object; errors here quote no event_id."""
    try:
        data = load_json(raw, "event")
    except BadJSON as exc:
        raise InvalidEvent(str(exc)) from None
    if not isinstance(data, dict):
        raise InvalidEvent("An event must be a JSON object.")
    event_id = data.get("event_id")
    if event_id is not None and (not isinstance(event_id, str) or len(event_id) > MAX_EVENT_ID_CHARS):
        raise InvalidValue(
            f"event_id must be a string of at most {MAX_EVENT_ID_CHARS} characters.", param="event_id"
        )
    kind = data.get("type")
    if not isinstance(kind, str):
        raise InvalidEvent("The event has no string 'type'.", param="type")
    return kind, event_id, data


def _validate(model: type[ModelT], data: dict[str, Any]) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from None


def _unknown(kind: str, session: str) -> InvalidEvent:
    return InvalidEvent(
        f"Unknown or unsupported event type {kind[:60]!r} for a {session} session.", param="type"
    )


class ClientParser:
    """Parses one transcription connection's client events, and follows the generation it speaks.

    The generation only shapes `*.created` / `*.updated` (`protocol.realtime.server_events`), and
    every `updated` answers an update, which sets the generation by its own type;
    so it is taken from each update that parses, even one the session then refuses.
    """

    def __init__(self, generation: Generation) -> None:
        self.generation = generation

    def parse(self, raw: str | bytes) -> transcription.ClientEvent:
        """The session event in a frame; a bad one becomes `Rejected` (this never raises ClientError)."""
        return _parse(raw, self._event, transcription.Rejected)

    def _event(self, kind: str, event_id: str | None, data: dict[str, Any]) -> transcription.ClientEvent:
        if kind == "transcription_session.update":
            beta = _validate(BetaTranscriptionSessionUpdate, data)
            self.generation = Generation.BETA
            return transcription.UpdateSession(beta.session.values(), event_id)
        if kind == "session.update":
            ga = _validate(TranscriptionSessionUpdate, data)
            self.generation = Generation.GA
            return transcription.UpdateSession(ga.session.values(), event_id)
        if kind == "input_audio_buffer.append":
            return transcription.AppendAudio(_validate(InputAudioBufferAppend, data).audio, event_id)
        if kind == "input_audio_buffer.commit":
            _validate(InputAudioBufferCommit, data)
            return transcription.CommitBuffer(event_id)
        if kind == "input_audio_buffer.clear":
            _validate(InputAudioBufferClear, data)
            return transcription.ClearBuffer(event_id)
        raise _unknown(kind, "transcription")


class AgentClientParser:
    """Parses one agent connection's client events, and follows the generation it speaks.

    Both generations name the update `session.update`; GA's session carries
    `session.type` and beta's does not, so an update with a type is read (and sets
    the generation) as GA's, and one without as the connection's generation reads it.
    """

    def __init__(self, generation: Generation) -> None:
        self.generation = generation

    def parse(self, raw: str | bytes) -> agent.ClientEvent:
        """The session event in a frame; a bad one becomes `Rejected` (this never raises ClientError).

        The reference agent's error table names a frame it cannot take
        `unknown_or_invalid_event`, so the agent's refusals carry that code.
        """
        event = _parse(raw, self._event, agent.Rejected)
        if (
            isinstance(event, agent.Rejected)
            and type(event.error) is InvalidEvent
            and event.error.code == InvalidEvent.code
        ):
            event = agent.Rejected(
                InvalidEvent(event.error.message, code=UNKNOWN_OR_INVALID_EVENT, param=event.error.param),
                event.event_id,
            )
        return event

    def _event(self, kind: str, event_id: str | None, data: dict[str, Any]) -> agent.ClientEvent:
        if kind == "session.update":
            return self._update(event_id, data)
        if kind == "input_audio_buffer.append":
            return agent.AppendAudio(_validate(InputAudioBufferAppend, data).audio, event_id)
        if kind == "input_audio_buffer.commit":
            _validate(InputAudioBufferCommit, data)
            return agent.CommitBuffer(event_id)
        if kind == "input_audio_buffer.clear":
            _validate(InputAudioBufferClear, data)
            return agent.ClearBuffer(event_id)
        if kind == "conversation.item.create":
            create = _validate(ConversationItemCreate, data)
            item, audio = create.item.item()
            return agent.CreateItem(item, create.previous_item_id, event_id, audio)
        if kind == "response.create":
            params = _validate(ResponseCreate, data).response
            if params is None:
                return agent.CreateResponse(event_id=event_id)
            return agent.CreateResponse(
                params.overrides(),
                event_id,
                metadata=params.metadata,
                out_of_band=params.conversation == "none",
                input=params.context(),
            )
        if kind == "response.cancel":
            return agent.CancelResponse(_validate(ResponseCancel, data).response_id, event_id)
        if kind == "output_audio_buffer.clear":
            _validate(OutputAudioBufferClear, data)
            return agent.ClearOutputAudio(event_id)
        if kind == "conversation.item.retrieve":
            return agent.RetrieveItem(_validate(ConversationItemRetrieve, data).item_id, event_id)
        if kind == "conversation.item.delete":
            return agent.DeleteItem(_validate(ConversationItemDelete, data).item_id, event_id)
        if kind == "conversation.item.truncate":
            cut = _validate(ConversationItemTruncate, data)
            return agent.TruncateItem(cut.item_id, cut.content_index, cut.audio_end_ms, event_id)
        raise _unknown(kind, "realtime")

    def _update(self, event_id: str | None, data: dict[str, Any]) -> agent.UpdateSession:
        session = data.get("session")
        if isinstance(session, dict) and session.get("type") == "transcription":
            raise InvalidValue(
                "This endpoint serves voice-agent (realtime) sessions; for a transcription session "
                "connect to /v1/realtime?intent=transcription.",
                code="invalid_session_type",
                param="session.type",
            )
        if self.generation is Generation.GA or (isinstance(session, dict) and "type" in session):
            values = _validate(AgentSessionUpdate, data).session.values()
            self.generation = Generation.GA
        else:
            values = _validate(BetaAgentSessionUpdate, data).session.values()
        return agent.UpdateSession(values, event_id)
