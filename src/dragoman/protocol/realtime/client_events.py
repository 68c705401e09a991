"""OpenAI Realtime client events, as strict models, for transcription and agent sessions.

A transcription session (`/v1/realtime?intent=transcription`) takes
`transcription_session.update` (beta) or `session.update` with `session.type:
"transcription"` (GA), and `input_audio_buffer.append/commit/clear`. An agent session
(`/v1/realtime`) takes `session.update` (`session.type: "realtime"` in GA, the flat
beta session otherwise), the same buffer events, `conversation.item.create`,
`response.create`, `response.cancel` and `output_audio_buffer.clear`. Field names and
shapes are those of `openai.types.realtime` (GA) and `openai.types.beta.realtime`.

`ClientParser` and `AgentClientParser` parse one connection's frames into the
session's input events (`sessions.transcription.events`, `sessions.agent.events`);
everything about the wire is checked here, and what needs the session's state
(the item cap, an empty buffer, a known call id) there. A bad frame becomes the
session's `Rejected` event with `InvalidEvent` (not an event we serve: bad JSON, no
type, an unknown type) or `InvalidValue` (a field is wrong, `param` its path).
Unknown fields are ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Discriminator, Field, Tag, ValidationError, model_validator

from dragoman.errors import ClientError, InvalidEvent, InvalidValue
from dragoman.protocol.json_frames import BadJSON, load_json
from dragoman.protocol.realtime.fields import (
    CUSTOM,
    MAX_EVENT_ID_CHARS,
    ClientModel,
    Id,
    fault,
    invalid,
)
from dragoman.protocol.realtime.generation import Generation, default_input_rate, format_for, generation_of
from dragoman.protocol.realtime.session_fields import Instructions, MaxTokens, Modalities, Voice, present
from dragoman.protocol.realtime.session_models import (
    AgentSession,
    BetaAgentSession,
    BetaToolChoice,
    BetaTranscriptionSession,
    Tools,
    TranscriptionSession,
    modalities,
    tool_choice,
)
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
#: Longest text a message part, or a function's output, may carry.
MAX_TEXT_CHARS = 32_000
MAX_CONTENT_PARTS = 16

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
EventId = Annotated[str, Field(max_length=MAX_EVENT_ID_CHARS)]


class ClientEvent(ClientModel):
    type: str
    event_id: EventId | None = None


# -- both sessions ---------------------------------------------------------------------


class InputAudioBufferAppend(ClientEvent):
    type: Literal["input_audio_buffer.append"]
    #: Base64 PCM16 at the session's input rate (decoded by the session, which carries the odd byte).
    audio: str


class InputAudioBufferCommit(ClientEvent):
    type: Literal["input_audio_buffer.commit"]


class InputAudioBufferClear(ClientEvent):
    type: Literal["input_audio_buffer.clear"]


# -- transcription sessions ----------------------------------------------------------


class BetaTranscriptionSessionUpdate(ClientEvent):
    type: Literal["transcription_session.update"]
    session: BetaTranscriptionSession


class TranscriptionSessionUpdate(ClientEvent):
    type: Literal["session.update"]
    session: TranscriptionSession


# -- agent sessions --------------------------------------------------------------------


class AgentSessionUpdate(ClientEvent):
    type: Literal["session.update"]
    session: AgentSession


class BetaAgentSessionUpdate(ClientEvent):
    type: Literal["session.update"]
    session: BetaAgentSession


class TextPart(ClientModel):
    #: GA: user and system messages hold `input_text`, assistant messages `output_text` (beta: `text`).
    type: Literal["input_text", "output_text", "text"]
    text: Text


class MessageItem(ClientModel):
    type: Literal["message"] = "message"
    id: Id | None = None
    role: Literal["user", "system", "assistant"]
    content: Annotated[list[TextPart], Field(min_length=1, max_length=MAX_CONTENT_PARTS)]

    @model_validator(mode="after")
    def _parts_fit_the_role(self) -> MessageItem:
        expected = ("output_text", "text") if self.role == "assistant" else ("input_text",)
        for index, part in enumerate(self.content):
            if part.type not in expected:
                article = "An" if self.role == "assistant" else "A"
                raise fault(
                    f"{article} {self.role} message holds {' or '.join(map(repr, expected))} parts, "
                    f"not {part.type!r}.",
                    field=f"content[{index}].type",
                )
        return self

    def item(self) -> agent.Message:
        kind: Literal["input_text", "output_text"] = (
            "output_text" if self.role == "assistant" else "input_text"
        )
        parts = tuple(agent.ContentPart(kind, text=part.text) for part in self.content)
        return agent.Message(self.id, self.role, parts)


class FunctionCallOutputItem(ClientModel):
    type: Literal["function_call_output"]
    id: Id | None = None
    call_id: Id
    output: Text

    def item(self) -> agent.FunctionCallOutput:
        return agent.FunctionCallOutput(self.id, self.call_id, self.output)


def _item_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "Message"  # reported as "expected an object"
    kind = value.get("type", "message")
    if not isinstance(kind, str):  # a list or an object is no type (and unhashable)
        return None
    return {"message": "Message", "function_call_output": "Output"}.get(kind)


NewItem = Annotated[
    Annotated[MessageItem, Tag("Message")] | Annotated[FunctionCallOutputItem, Tag("Output")],
    Discriminator(
        _item_kind,
        custom_error_type=CUSTOM,
        custom_error_message="{message}",
        custom_error_context={
            "message": "Unsupported item type; use a 'message' (text) or a 'function_call_output' item.",
            "field": "type",
        },
    ),
]


class ConversationItemCreate(ClientEvent):
    type: Literal["conversation.item.create"]
    previous_item_id: Id | None = None
    item: NewItem


class ResponseAudioOutput(ClientModel):
    voice: Voice | None = None


class ResponseAudio(ClientModel):
    output: ResponseAudioOutput | None = None


class ResponseParams(ClientModel):
    """`response.create`'s overrides, under GA's names and beta's (`modalities`, `voice`);
    a field left out or null overrides nothing."""

    instructions: Instructions | None = None
    output_modalities: Modalities | None = None
    modalities: Modalities | None = None
    tools: Tools | None = None
    #: GA's modes and function object, and beta's function name.
    tool_choice: BetaToolChoice | None = None
    #: "inf" (None) is an override too.
    max_output_tokens: MaxTokens = None
    max_response_output_tokens: MaxTokens = None
    audio: ResponseAudio | None = None
    voice: Voice | None = None
    #: "Set this to `none` to create an out-of-band response which will not add items to default
    #: conversation": only the default conversation is served.
    conversation: Literal["auto"] | None = None

    def overrides(self) -> dict[str, Any]:
        values = present(
            self,
            {
                "instructions": "instructions",
                "modalities": "output_modalities",
                "output_modalities": "output_modalities",
                "tools": "tools",
                "tool_choice": "tool_choice",
                "voice": "voice",
            },
        )
        if self.audio is not None and self.audio.output is not None:
            values |= present(self.audio.output, {"voice": "voice"})
        values = {key: value for key, value in values.items() if value is not None}
        if "output_modalities" in values:
            values["output_modalities"] = modalities(values["output_modalities"])
        if "tools" in values:
            values["tools"] = tuple(tool.tool() for tool in values["tools"])
        if "tool_choice" in values:
            values["tool_choice"] = tool_choice(values["tool_choice"])
        return values | present(
            self,
            {"max_response_output_tokens": "max_output_tokens", "max_output_tokens": "max_output_tokens"},
        )


class ResponseCreate(ClientEvent):
    type: Literal["response.create"]
    response: ResponseParams | None = None


class ResponseCancel(ClientEvent):
    type: Literal["response.cancel"]
    response_id: Id | None = None


class OutputAudioBufferClear(ClientEvent):
    type: Literal["output_audio_buffer.clear"]


class ConversationItemRetrieve(ClientEvent):
    type: Literal["conversation.item.retrieve"]
    item_id: Id


class ConversationItemDelete(ClientEvent):
    type: Literal["conversation.item.delete"]
    item_id: Id


class ConversationItemTruncate(ClientEvent):
    type: Literal["conversation.item.truncate"]
    item_id: Id
    content_index: Annotated[int, Field(ge=0, strict=True)]
    #: "Inclusive duration up to which audio is truncated, in milliseconds."
    audio_end_ms: Annotated[int, Field(ge=0, strict=True)]


# -- parsing -------------------------------------------------------------------------

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
            return agent.CreateItem(create.item.item(), create.previous_item_id, event_id)
        if kind == "response.create":
            params = _validate(ResponseCreate, data).response
            return agent.CreateResponse(params.overrides() if params else {}, event_id)
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
