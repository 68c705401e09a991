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

from dragoman.errors import InvalidValue
from dragoman.protocol.realtime.fields import (
    CUSTOM,
    MAX_EVENT_ID_CHARS,
    ClientModel,
    Id,
    fault,
)
from dragoman.protocol.realtime.session_fields import (
    BetaToolChoice,
    FunctionName,
    Instructions,
    MaxTokens,
    Modalities,
    Tools,
    Voice,
    modalities,
    present,
    tool_choice,
)
from dragoman.protocol.realtime.session_models import (
    AgentSession,
    BetaAgentSession,
    BetaTranscriptionSession,
    TranscriptionSession,
)
from dragoman.sessions.agent import events as agent

#: Longest text a message part, or a function's output, may carry.
MAX_TEXT_CHARS = 32_000
MAX_CONTENT_PARTS = 16

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
#: Items a response's own context may hold.
MAX_INPUT_ITEMS = 256
#: OpenAI's metadata: "Keys are strings with a maximum length of 64 characters. Values are
#: strings with a maximum length of 512 characters", at most 16 pairs.
Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16),
]
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


class ContentPart(ClientModel):
    """A message's part, as OpenAI's `RealtimeConversationItem*` content: text (GA
    `input_text` / `output_text`, beta `text`), audio (`input_audio` / `output_audio`, beta
    `audio`) with its transcript, or an image (refused: the model reads text only)."""

    type: Literal["input_text", "output_text", "text", "input_audio", "output_audio", "audio", "input_image"]
    text: Text | None = None
    #: Base64 audio in the session's input format (`input_audio`).
    audio: str | None = None
    transcript: Text | None = None


#: The parts each role's message holds (OpenAI's user, system and assistant message types).
_PARTS = {
    "user": ("input_text", "input_audio", "input_image"),
    "system": ("input_text",),
    "assistant": ("output_text", "text", "output_audio", "audio"),
}


class MessageItem(ClientModel):
    type: Literal["message"] = "message"
    id: Id | None = None
    role: Literal["user", "system", "assistant"]
    content: Annotated[list[ContentPart], Field(min_length=1, max_length=MAX_CONTENT_PARTS)]

    @model_validator(mode="after")
    def _parts_fit_the_role(self) -> MessageItem:
        expected = _PARTS[self.role]
        for index, part in enumerate(self.content):
            at = f"content[{index}]"
            if part.type not in expected:
                article = "An" if self.role == "assistant" else "A"
                raise fault(
                    f"{article} {self.role} message holds {' or '.join(map(repr, expected))} parts, "
                    f"not {part.type!r}.",
                    field=f"{at}.type",
                )
            if part.type == "input_image":
                raise fault(
                    "This server's model reads text only and cannot see images; describe the image "
                    "in an input_text part instead.",
                    field=f"{at}.type",
                )
            if part.type.endswith("text") and part.text is None:
                raise fault(f"A {part.type} part needs its text.", field=f"{at}.text")
            if part.type == "input_audio" and part.audio is None and part.transcript is None:
                raise fault("An input_audio part needs its audio or its transcript.", field=f"{at}.audio")
        return self

    def item(self) -> tuple[agent.Message, dict[int, agent.InputAudio]]:
        """The message, and the audio of its parts that came without a transcript, by index."""
        parts: list[agent.ContentPart] = []
        audio: dict[int, agent.InputAudio] = {}
        for index, part in enumerate(self.content):
            if part.type in ("input_text", "output_text", "text"):
                kind: Any = "output_text" if self.role == "assistant" else "input_text"
                parts.append(agent.ContentPart(kind, text=part.text))
            elif part.type == "input_audio":
                parts.append(agent.ContentPart("input_audio", transcript=part.transcript))
                if part.transcript is None and part.audio is not None:
                    audio[index] = agent.InputAudio(part.audio)
            else:  # an assistant's audio: the model knows it by its transcript
                parts.append(agent.ContentPart("output_audio", transcript=part.transcript or ""))
        return agent.Message(self.id, self.role, tuple(parts)), audio


class FunctionCallItem(ClientModel):
    """A function call of the model's, as a client restores history (an agent handoff)."""

    type: Literal["function_call"]
    id: Id | None = None
    call_id: Id
    name: FunctionName
    arguments: Text = ""

    def item(self) -> tuple[agent.FunctionCall, dict[int, agent.InputAudio]]:
        return agent.FunctionCall(self.id, self.call_id, self.name, self.arguments), {}


class FunctionCallOutputItem(ClientModel):
    type: Literal["function_call_output"]
    id: Id | None = None
    call_id: Id
    output: Text

    def item(self) -> tuple[agent.FunctionCallOutput, dict[int, agent.InputAudio]]:
        return agent.FunctionCallOutput(self.id, self.call_id, self.output), {}


class ItemReference(ClientModel):
    """`response.create`'s `input` may name an item of the conversation."""

    type: Literal["item_reference"]
    id: Id


_ITEM_TAGS = {
    "message": "Message",
    "function_call": "Call",
    "function_call_output": "Output",
    "item_reference": "Reference",
}


def _item_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "Message"  # reported as "expected an object"
    kind = value.get("type", "message")
    if not isinstance(kind, str):  # a list or an object is no type (and unhashable)
        return None
    return _ITEM_TAGS.get(kind)


def _unsupported(message: str) -> Discriminator:
    return Discriminator(
        _item_kind,
        custom_error_type=CUSTOM,
        custom_error_message="{message}",
        custom_error_context={"message": message, "field": "type"},
    )


_ITEMS = "a 'message', a 'function_call' or a 'function_call_output' item"
NewItem = Annotated[
    Annotated[MessageItem, Tag("Message")]
    | Annotated[FunctionCallItem, Tag("Call")]
    | Annotated[FunctionCallOutputItem, Tag("Output")],
    _unsupported(f"Unsupported item type; use {_ITEMS}."),
]
InputItem = Annotated[
    Annotated[MessageItem, Tag("Message")]
    | Annotated[FunctionCallItem, Tag("Call")]
    | Annotated[FunctionCallOutputItem, Tag("Output")]
    | Annotated[ItemReference, Tag("Reference")],
    # No custom error here: its context (a dict) cannot be hashed in the Optional below.
    Discriminator(_item_kind),
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
    #: conversation": only the default conversation is served besides.
    conversation: Literal["auto", "none"] | None = None
    #: "Set of 16 key-value pairs that can be attached to an object"; echoed in the response.
    metadata: Metadata | None = None
    #: "Input items to include in the prompt for the model. Using this field creates a new
    #: context for this Response instead of using the default conversation."
    input: Annotated[list[InputItem], Field(max_length=MAX_INPUT_ITEMS)] | None = None

    def context(self) -> tuple[agent.Item | agent.ItemReference, ...] | None:
        """The response's own context, or None for the conversation's."""
        if self.input is None:
            return None
        entries: list[agent.Item | agent.ItemReference] = []
        for index, entry in enumerate(self.input):
            if isinstance(entry, ItemReference):
                entries.append(agent.ItemReference(entry.id))
                continue
            item, audio = entry.item()
            if audio:
                raise InvalidValue(
                    "An input_audio part in response.input needs its transcript; to have audio "
                    "transcribed, add it with conversation.item.create and reference it.",
                    param=f"response.input[{index}].content",
                )
            entries.append(item)
        return tuple(entries)

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
