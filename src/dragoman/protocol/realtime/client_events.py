"""OpenAI Realtime client events, as strict models, for transcription and agent sessions.

A transcription session (`/v1/realtime?intent=transcription`) takes
`transcription_session.update` (beta) or `session.update` with `session.type:
"transcription"` (GA), and `input_audio_buffer.append/commit/clear`. An agent session
(`/v1/realtime`) takes `session.update` (`session.type: "realtime"` in GA, the flat
beta session otherwise), the same buffer events, `conversation.item.create`,
`response.create`, `response.cancel` and `output_audio_buffer.clear`. Field names and
shapes are those of `openai.types.realtime` (GA) and `openai.types.beta.realtime`.
Unknown fields are ignored.

`protocol.realtime.client_parsers` parses a connection's frames as these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from dragoman.protocol.realtime.fields import (
    CUSTOM,
    MAX_EVENT_ID_CHARS,
    ClientModel,
    Id,
    fault,
)
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
