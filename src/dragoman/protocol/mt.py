"""MT protocol v1 on the wire (alignatt-mt-server's): JSON text frames.

Client messages are parsed strictly (a bool is not an int, a string is not a
number) but unknown fields are ignored, so a newer client still works. Parsing
failures raise `InvalidEvent` (not a message we know) or `InvalidValue` (a field
is wrong); the server answers both with a `bad_protocol` error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from dragoman.errors import InvalidEvent, InvalidValue
from dragoman.protocol.json_frames import BadJSON, load_json
from dragoman.sessions.mt.events import (
    PROTOCOL_VERSION,
    Error,
    ErrorCode,
    Init,
    InitOk,
    ServerEvent,
    Translation,
    Update,
    Word,
)

#: Most committed or tail words one update may carry.
MAX_UPDATE_WORDS = 2000
#: Longest single word, in characters.
MAX_WORD_CHARS = 200

Ms = Annotated[float, Field(ge=0, allow_inf_nan=False)]
WordText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_WORD_CHARS)]
#: [text, start_ms, end_ms]; timestamps may be null.
WordTriple = tuple[WordText, Ms | None, Ms | None]
LangCode = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=35)]


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class InitMessage(_Message):
    type: Literal["init"]
    protocol_version: int
    source_lang: LangCode
    target_lang: LangCode
    preset: Annotated[str, StringConstraints(max_length=100)] | None = None
    overrides: dict[str, Any] | None = None
    context_text: str | None = None
    history: Annotated[list[tuple[str, str]], Field(max_length=64)] | None = None
    accepted_target_prefix: str | None = None

    def to_event(self) -> Init:
        return Init(
            protocol_version=self.protocol_version,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            preset=self.preset or None,
            overrides=dict(self.overrides or {}),
            context_text=self.context_text,
            history=tuple(self.history or ()),
            accepted_target_prefix=self.accepted_target_prefix or "",
        )


class TailPayload(_Message):
    words: Annotated[list[WordTriple], Field(max_length=MAX_UPDATE_WORDS)] = []


class UpdateMessage(_Message):
    type: Literal["update"]
    seq: int
    utterance_id: Annotated[int, Field(ge=0)]
    words: Annotated[list[WordTriple], Field(max_length=MAX_UPDATE_WORDS)]
    tail: TailPayload | None = None
    clock_ms: Ms
    is_final: bool = False

    def to_event(self) -> Update:
        return Update(
            seq=self.seq,
            utterance_id=self.utterance_id,
            words=tuple(Word(text, start, end) for text, start, end in self.words),
            tail=tuple(text for text, _, _ in (self.tail.words if self.tail else [])),
            clock_ms=self.clock_ms,
            is_final=self.is_final,
        )


ClientMessage = InitMessage | UpdateMessage
_CLIENT_TYPES: dict[str, type[InitMessage] | type[UpdateMessage]] = {
    "init": InitMessage,
    "update": UpdateMessage,
}


class InitOkMessage(_Message):
    type: Literal["init_ok"] = "init_ok"
    protocol_version: int = PROTOCOL_VERSION
    direction: str
    preset: str
    model: str


class TranslationMessage(_Message):
    type: Literal["translation"] = "translation"
    seq: int
    utterance_id: int
    final: bool
    forced_final: bool = False
    committed_text: str
    committed_delta: str
    buffer_text: str
    #: Null when unavailable (no attention-backed commit yet).
    covered_source_units: int | None
    stop_reason: str


class ErrorMessage(_Message):
    type: Literal["error"] = "error"
    code: ErrorCode
    message: str
    supported: list[str] | None = None
    seq: int | None = None
    error_id: str | None = None


ServerMessage = InitOkMessage | TranslationMessage | ErrorMessage
_SERVER_TYPES: dict[str, type[ServerMessage]] = {
    "init_ok": InitOkMessage,
    "translation": TranslationMessage,
    "error": ErrorMessage,
}


def _message_type(raw: str | bytes) -> str:
    if not isinstance(raw, str):
        raise InvalidEvent("Messages must be JSON text frames, not binary.")
    try:
        data = load_json(raw, "message")
    except BadJSON as exc:
        raise InvalidEvent(str(exc)) from None
    if not isinstance(data, dict):
        raise InvalidEvent("A message must be a JSON object.")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise InvalidEvent("The message has no string 'type'.", param="type")
    return kind


def _invalid(kind: str, exc: ValidationError) -> InvalidValue:
    first = exc.errors(include_url=False, include_input=False)[0]
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"])
    field = path.lstrip(".") or "message"
    return InvalidValue(f"Invalid {kind} message: {field}: {first['msg']}.", param=field)


def parse_client_message(raw: str | bytes) -> ClientMessage:
    """The client message in a text frame; raises InvalidEvent or InvalidValue."""
    kind = _message_type(raw)
    model = _CLIENT_TYPES.get(kind)
    if model is None:
        raise InvalidEvent(f"Unknown message type {kind[:40]!r}; expected 'init' or 'update'.", param="type")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise _invalid(kind, exc) from None


def peek_seq(raw: str | bytes) -> int | None:
    """The `seq` of a frame that failed to parse, so that its error can carry it."""
    try:
        # No depth bound: a frame refused for its nesting still names its seq (when Python can
        # read it at all), and nothing here walks the value.
        seq = json.loads(raw).get("seq")
    except (ValueError, RecursionError, AttributeError, TypeError):
        return None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def server_message(event: ServerEvent) -> ServerMessage:
    if isinstance(event, InitOk):
        return InitOkMessage(
            protocol_version=event.protocol_version,
            direction=event.direction,
            preset=event.preset,
            model=event.model,
        )
    if isinstance(event, Translation):
        return TranslationMessage(
            seq=event.seq,
            utterance_id=event.utterance_id,
            final=event.final,
            forced_final=event.forced_final,
            committed_text=event.committed_text,
            committed_delta=event.committed_delta,
            buffer_text=event.buffer_text,
            covered_source_units=event.covered_source_units,
            stop_reason=event.stop_reason,
        )
    return ErrorMessage(
        code=event.code,
        message=event.message,
        supported=list(event.supported) if event.supported is not None else None,
        seq=event.seq,
        error_id=event.error_id,
    )


def encode(event: ServerEvent) -> str:
    """The JSON text frame of a server event (errors leave out the fields they lack)."""
    message = server_message(event)
    return message.model_dump_json(exclude_none=isinstance(message, ErrorMessage))


def error_frame(code: ErrorCode, message: str, *, seq: int | None = None) -> str:
    return encode(Error(code, message, seq=seq))


def parse_server_message(raw: str | bytes) -> ServerMessage:
    """A server frame, validated (for clients and tests)."""
    kind = _message_type(raw)
    model = _SERVER_TYPES.get(kind)
    if model is None:
        raise InvalidEvent(f"Unknown message type {kind[:40]!r}.", param="type")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise _invalid(kind, exc) from None
