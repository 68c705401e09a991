"""Events in and out of an agent (speech-to-speech) session, free of any wire format.

`protocol/realtime/client_parsers.py` (`AgentClientParser`) turns the client's JSON into the
input events, and `protocol/realtime/agent_events.py` writes the output events as OpenAI
Realtime server events of the client's generation (beta or GA); the session only sees
these, and its settings (`sessions.agent.config`). What the speech front says of the
user's turns (`sessions.speech.events`: speech started and stopped, commits, the
turn's transcript, errors) an agent session sends as it is, as a transcription
session does. Names follow OpenAI's GA Realtime API (`output_text`,
`conversation.item.added`); the protocol maps them to beta's where the client
speaks beta. Each input event carries the client's `event_id` so that an error it
causes can quote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dragoman.errors import DragomanError
from dragoman.sessions.agent.config import AgentConfig, Codec, Modality
from dragoman.sessions.speech.events import AppendAudio, ClearBuffer, CommitBuffer, Rejected, SpeechEvent

# -- conversation items --------------------------------------------------------------

ItemStatus = Literal["completed", "incomplete", "in_progress"]


@dataclass(frozen=True)
class ContentPart:
    """One part of a message: `text` for the text kinds, `transcript` for the audio kinds."""

    type: Literal["input_text", "input_audio", "output_text", "output_audio"]
    text: str | None = None
    #: None while the audio has no transcript (yet).
    transcript: str | None = None


@dataclass(frozen=True)
class Message:
    #: None only in a client's `conversation.item.create` that named none: the session assigns one.
    id: str | None
    role: Literal["user", "assistant", "system"]
    content: tuple[ContentPart, ...]
    status: ItemStatus = "completed"


@dataclass(frozen=True)
class FunctionCall:
    id: str | None
    call_id: str
    name: str
    #: JSON text, as the model wrote it.
    arguments: str
    status: ItemStatus = "completed"


@dataclass(frozen=True)
class FunctionCallOutput:
    id: str | None
    call_id: str
    output: str
    status: ItemStatus = "completed"


Item = Message | FunctionCall | FunctionCallOutput

# -- in ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateSession:
    """A session update, checked for its wire types; keys are `AgentConfig` fields, absent ones left out."""

    values: Mapping[str, Any] = field(default_factory=dict)
    event_id: str | None = None


@dataclass(frozen=True)
class InputAudio:
    """A client's `input_audio` part: audio (PCM16 at the session's input rate, or G.711) that
    the session transcribes, unless the client gave its transcript."""

    #: Base64, in the session's input format.
    audio: str


@dataclass(frozen=True)
class CreateItem:
    """`conversation.item.create`: a message (text, or audio with its transcript), a function
    call or a function's output. `audio` holds the audio of the message's `input_audio` parts
    that came without a transcript, by content index, for the session to transcribe."""

    item: Item
    #: None: append at the end. (OpenAI: "If set to `root`, the new item will be added to the
    #: beginning of the conversation.")
    previous_item_id: str | None = None
    event_id: str | None = None
    audio: Mapping[int, InputAudio] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemReference:
    """`{"type": "item_reference", "id": ...}` in `response.create`'s `input`: an item of the
    conversation, by id."""

    id: str


@dataclass(frozen=True)
class CreateResponse:
    """`response.create`; `overrides` (keyed by `AgentConfig` fields) apply to this response only.

    `out_of_band` (`conversation: "none"`): the response's items are not added to the
    conversation. `input`: the response's own context instead of the conversation (None: the
    conversation). `metadata` is echoed in `response.created` and `response.done`."""

    overrides: Mapping[str, Any] = field(default_factory=dict)
    event_id: str | None = None
    metadata: Mapping[str, str] | None = None
    out_of_band: bool = False
    input: tuple[Item | ItemReference, ...] | None = None


@dataclass(frozen=True)
class CancelResponse:
    #: None: the response in progress, if any.
    response_id: str | None = None
    event_id: str | None = None


@dataclass(frozen=True)
class ClearOutputAudio:
    """`output_audio_buffer.clear`: stop the audio of the response in progress."""

    event_id: str | None = None


@dataclass(frozen=True)
class RetrieveItem:
    """`conversation.item.retrieve`: the server's copy of an item."""

    item_id: str
    event_id: str | None = None


@dataclass(frozen=True)
class DeleteItem:
    """`conversation.item.delete`: an item out of the conversation (and the LLM's view)."""

    item_id: str
    event_id: str | None = None


@dataclass(frozen=True)
class TruncateItem:
    """`conversation.item.truncate`: an assistant message's audio was played only up to
    `audio_end_ms`, so its transcript keeps only what the user heard."""

    item_id: str
    content_index: int
    audio_end_ms: int
    event_id: str | None = None


ItemRequest = RetrieveItem | DeleteItem | TruncateItem

ClientEvent = (
    UpdateSession
    | AppendAudio
    | CommitBuffer
    | ClearBuffer
    | CreateItem
    | CreateResponse
    | CancelResponse
    | ClearOutputAudio
    | RetrieveItem
    | DeleteItem
    | TruncateItem
    | Rejected
)

# -- out ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionConfigured:
    """The session's settings, on creation and after each accepted update."""

    created: bool
    session_id: str
    config: AgentConfig
    #: The model reported when the client named none.
    engine_name: str


@dataclass(frozen=True)
class ItemAdded:
    """An item joined the conversation (GA `conversation.item.added`, beta `conversation.item.created`)."""

    item: Item
    previous_item_id: str | None


@dataclass(frozen=True)
class ItemDone:
    """An item is final (GA `conversation.item.done`; beta has no such event and is sent nothing)."""

    item: Item
    previous_item_id: str | None


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    #: Input tokens the LLM read from its cache (a KV snapshot or a prefix cache).
    cached_tokens: int = 0


@dataclass(frozen=True)
class Response:
    id: str
    status: Literal["in_progress", "completed", "cancelled", "incomplete", "failed"] = "in_progress"
    #: Why it ended early: "turn_detected" (the user barged in), "client_cancelled", "max_output_tokens".
    reason: Literal["turn_detected", "client_cancelled", "max_output_tokens"] | None = None
    output: tuple[Item, ...] = ()
    output_modalities: tuple[Modality, ...] = ("audio",)
    voice: str | None = None
    output_rate: int = 24_000
    output_codec: Codec = "pcm16"
    max_output_tokens: int | None = None
    usage: Usage | None = None
    #: What failed a "failed" response.
    error: DragomanError | None = None
    #: The client's `response.metadata`, echoed.
    metadata: Mapping[str, str] | None = None
    #: False for an out-of-band response (`conversation: "none"`).
    in_conversation: bool = True


@dataclass(frozen=True)
class ResponseCreated:
    response: Response


@dataclass(frozen=True)
class ResponseDone:
    response: Response


@dataclass(frozen=True)
class OutputItemAdded:
    response_id: str
    output_index: int
    item: Item


@dataclass(frozen=True)
class OutputItemDone:
    response_id: str
    output_index: int
    item: Item


@dataclass(frozen=True)
class _InPart:
    """Where a piece of a response goes: its response, item and content part."""

    response_id: str
    item_id: str
    output_index: int
    content_index: int


@dataclass(frozen=True)
class ContentPartAdded(_InPart):
    part: ContentPart


@dataclass(frozen=True)
class ContentPartDone(_InPart):
    part: ContentPart


@dataclass(frozen=True)
class AudioDelta(_InPart):
    #: Base64 PCM16 at the response's output rate.
    delta: str


@dataclass(frozen=True)
class AudioDone(_InPart):
    pass


@dataclass(frozen=True)
class AudioTranscriptDelta(_InPart):
    delta: str


@dataclass(frozen=True)
class AudioTranscriptDone(_InPart):
    transcript: str


@dataclass(frozen=True)
class TextDelta(_InPart):
    delta: str


@dataclass(frozen=True)
class TextDone(_InPart):
    text: str


@dataclass(frozen=True)
class FunctionArgumentsDelta:
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    delta: str


@dataclass(frozen=True)
class FunctionArgumentsDone:
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class OutputAudioStarted:
    response_id: str


@dataclass(frozen=True)
class OutputAudioStopped:
    response_id: str


@dataclass(frozen=True)
class OutputAudioCleared:
    response_id: str


@dataclass(frozen=True)
class ItemRetrieved:
    item: Item


@dataclass(frozen=True)
class ItemDeleted:
    item_id: str


@dataclass(frozen=True)
class ItemTruncated:
    item_id: str
    content_index: int
    audio_end_ms: int


ServerEvent = (
    SessionConfigured
    | ItemAdded
    | ItemDone
    | ResponseCreated
    | ResponseDone
    | OutputItemAdded
    | OutputItemDone
    | ContentPartAdded
    | ContentPartDone
    | AudioDelta
    | AudioDone
    | AudioTranscriptDelta
    | AudioTranscriptDone
    | TextDelta
    | TextDone
    | FunctionArgumentsDelta
    | FunctionArgumentsDone
    | OutputAudioStarted
    | OutputAudioStopped
    | OutputAudioCleared
    | ItemRetrieved
    | ItemDeleted
    | ItemTruncated
    | SpeechEvent
)

__all__ = [
    "AppendAudio",
    "AudioDelta",
    "AudioDone",
    "AudioTranscriptDelta",
    "AudioTranscriptDone",
    "CancelResponse",
    "ClearBuffer",
    "ClearOutputAudio",
    "ClientEvent",
    "CommitBuffer",
    "ContentPart",
    "ContentPartAdded",
    "ContentPartDone",
    "CreateItem",
    "CreateResponse",
    "DeleteItem",
    "FunctionArgumentsDelta",
    "FunctionArgumentsDone",
    "FunctionCall",
    "FunctionCallOutput",
    "InputAudio",
    "Item",
    "ItemAdded",
    "ItemDeleted",
    "ItemDone",
    "ItemReference",
    "ItemRequest",
    "ItemRetrieved",
    "ItemStatus",
    "ItemTruncated",
    "Message",
    "OutputAudioCleared",
    "OutputAudioStarted",
    "OutputAudioStopped",
    "OutputItemAdded",
    "OutputItemDone",
    "Rejected",
    "Response",
    "ResponseCreated",
    "ResponseDone",
    "RetrieveItem",
    "ServerEvent",
    "SessionConfigured",
    "TextDelta",
    "TextDone",
    "TruncateItem",
    "UpdateSession",
    "Usage",
]
