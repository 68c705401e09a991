"""Conversation items and responses as an agent session's server events carry them.

The shapes are OpenAI's `RealtimeConversationItem*` and `RealtimeResponse`
(`openai.types.realtime`), and beta's `ConversationItem` and `RealtimeResponse`
(`openai.types.beta.realtime`). The generations differ in an assistant's content
types (GA `output_text` / `output_audio`, beta `text` / `audio`) and in how a
response names its output (GA `output_modalities` and `audio.output`, beta
`modalities`, `output_audio_format` and `voice`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dragoman.errors import DragomanError, ServerError
from dragoman.protocol.realtime.generation import AGENT_PCM16_RATE, Generation, format_for
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.config import Modality

ItemStatus = Literal["completed", "incomplete", "in_progress"]
#: Beta's names for GA's assistant content types.
_BETA_CONTENT = {"output_text": "text", "output_audio": "audio"}


class ServerModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextContent(ServerModel):
    type: Literal["input_text", "output_text", "text"]
    text: str


class AudioContent(ServerModel):
    """Audio is never sent back in an item, only its transcript (null while there is none)."""

    type: Literal["input_audio", "output_audio", "audio"]
    transcript: str | None


class MessageItem(ServerModel):
    id: str | None
    object: Literal["realtime.item"] = "realtime.item"
    type: Literal["message"] = "message"
    status: ItemStatus
    role: Literal["user", "assistant", "system"]
    content: list[TextContent | AudioContent]


class FunctionCallItem(ServerModel):
    id: str | None
    object: Literal["realtime.item"] = "realtime.item"
    type: Literal["function_call"] = "function_call"
    status: ItemStatus
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(ServerModel):
    id: str | None
    object: Literal["realtime.item"] = "realtime.item"
    type: Literal["function_call_output"] = "function_call_output"
    status: ItemStatus
    call_id: str
    output: str


Item = MessageItem | FunctionCallItem | FunctionCallOutputItem


class TextPart(ServerModel):
    """`response.content_part.added/done`'s part, "text" or "audio" in both generations; each
    carries only its own field (OpenAI omits the other, and a strict client's schema refuses a null)."""

    type: Literal["text"] = "text"
    text: str


class AudioPart(ServerModel):
    type: Literal["audio"] = "audio"
    transcript: str


Part = TextPart | AudioPart


class StatusError(ServerModel):
    type: str
    code: str | None = None
    message: str


class StatusDetails(ServerModel):
    type: Literal["completed", "cancelled", "incomplete", "failed"]
    #: GA: "turn_detected" (the server VAD detected a new start of speech) or "client_cancelled".
    reason: Literal["turn_detected", "client_cancelled", "max_output_tokens"] | None = None
    error: StatusError | None = None


class CachedTokenDetails(ServerModel):
    text_tokens: int
    audio_tokens: int
    image_tokens: int


class BetaInputTokenDetails(ServerModel):
    cached_tokens: int
    text_tokens: int
    audio_tokens: int


class InputTokenDetails(BetaInputTokenDetails):
    image_tokens: int
    cached_tokens_details: CachedTokenDetails


class OutputTokenDetails(ServerModel):
    text_tokens: int
    audio_tokens: int


class Usage(ServerModel):
    """OpenAI sends every count; the LLM reads and writes text only, so the audio and image
    counts are zeros."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    input_token_details: InputTokenDetails | BetaInputTokenDetails
    output_token_details: OutputTokenDetails


class AudioOutput(ServerModel):
    format: Any
    voice: str | None


class ResponseAudio(ServerModel):
    output: AudioOutput


class Response(ServerModel):
    """GA's `RealtimeResponse`."""

    id: str
    object: Literal["realtime.response"] = "realtime.response"
    status: Literal["in_progress", "completed", "cancelled", "incomplete", "failed"]
    status_details: StatusDetails | None
    output: list[Item]
    output_modalities: list[Literal["text", "audio"]]
    audio: ResponseAudio
    max_output_tokens: int | Literal["inf"]
    usage: Usage | None
    metadata: dict[str, str] | None


class BetaResponse(ServerModel):
    """Beta's `RealtimeResponse`."""

    id: str
    object: Literal["realtime.response"] = "realtime.response"
    status: Literal["in_progress", "completed", "cancelled", "incomplete", "failed"]
    status_details: StatusDetails | None
    output: list[Item]
    modalities: list[Literal["text", "audio"]]
    output_audio_format: Any
    voice: str | None
    max_output_tokens: int | Literal["inf"]
    usage: Usage | None
    metadata: dict[str, str] | None


def item_model(item: agent.Item, generation: Generation) -> Item:
    if isinstance(item, agent.Message):
        content = [_content(part, generation) for part in item.content]
        return MessageItem(id=item.id, status=item.status, role=item.role, content=content)
    if isinstance(item, agent.FunctionCall):
        return FunctionCallItem(
            id=item.id, status=item.status, call_id=item.call_id, name=item.name, arguments=item.arguments
        )
    return FunctionCallOutputItem(id=item.id, status=item.status, call_id=item.call_id, output=item.output)


def _content(part: agent.ContentPart, generation: Generation) -> TextContent | AudioContent:
    kind: Any = _BETA_CONTENT.get(part.type, part.type) if generation is Generation.BETA else part.type
    if part.type.endswith("audio"):
        return AudioContent(type=kind, transcript=part.transcript)
    return TextContent(type=kind, text=part.text or "")


def part_model(part: agent.ContentPart) -> Part:
    """A response's part: its text, or its audio's transcript so far."""
    if part.type.endswith("audio"):
        return AudioPart(transcript=part.transcript or "")
    return TextPart(text=part.text or "")


def response_model(response: agent.Response, generation: Generation) -> Response | BetaResponse:
    details = None
    if response.status != "in_progress":
        details = StatusDetails(
            type=response.status,
            reason=response.reason,
            error=_status_error(response.error) if response.error is not None else None,
        )
    usage = None if response.usage is None else _usage(response.usage, generation)
    output = [item_model(item, generation) for item in response.output]
    audio_format = format_for(generation, response.output_rate, AGENT_PCM16_RATE, response.output_codec)
    max_tokens: int | Literal["inf"] = response.max_output_tokens or "inf"
    if generation is Generation.BETA:
        return BetaResponse(
            id=response.id,
            status=response.status,
            status_details=details,
            output=output,
            modalities=_beta_modalities(response.output_modalities),
            output_audio_format=audio_format,
            voice=response.voice,
            max_output_tokens=max_tokens,
            usage=usage,
            metadata=_metadata(response.metadata),
        )
    return Response(
        id=response.id,
        status=response.status,
        status_details=details,
        output=output,
        output_modalities=list(response.output_modalities),
        audio=ResponseAudio(output=AudioOutput(format=audio_format, voice=response.voice)),
        max_output_tokens=max_tokens,
        usage=usage,
        metadata=_metadata(response.metadata),
    )


def _metadata(metadata: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if metadata is None else dict(metadata)


def _usage(used: agent.Usage, generation: Generation) -> Usage:
    details: InputTokenDetails | BetaInputTokenDetails
    if generation is Generation.GA:
        details = InputTokenDetails(
            cached_tokens=used.cached_tokens,
            text_tokens=used.input_tokens,
            audio_tokens=0,
            image_tokens=0,
            cached_tokens_details=CachedTokenDetails(
                text_tokens=used.cached_tokens, audio_tokens=0, image_tokens=0
            ),
        )
    else:
        details = BetaInputTokenDetails(
            cached_tokens=used.cached_tokens, text_tokens=used.input_tokens, audio_tokens=0
        )
    return Usage(
        total_tokens=used.input_tokens + used.output_tokens,
        input_tokens=used.input_tokens,
        output_tokens=used.output_tokens,
        input_token_details=details,
        output_token_details=OutputTokenDetails(text_tokens=used.output_tokens, audio_tokens=0),
    )


def _beta_modalities(modalities: tuple[Modality, ...]) -> list[Literal["text", "audio"]]:
    """Beta answers in audio with `["text", "audio"]` (audio and its transcript), in text with `["text"]`."""
    return ["text", "audio"] if "audio" in modalities else ["text"]


def _status_error(error: DragomanError) -> StatusError:
    """A client fault is quoted; a server fault shows only its error id (errors.py)."""
    if isinstance(error, ServerError):
        return StatusError(type="server_error", code=error.code, message=error.public_message)
    return StatusError(type=error.type, code=error.code, message=error.message)
