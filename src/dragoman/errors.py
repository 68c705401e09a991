"""The one error hierarchy.

Every failure the server reports is a `DragomanError`. `ClientError` is the
client's fault: its message is written for the client and is safe to send.
`ServerError` is ours: the client sees only a generic message and the error id,
and the details stay in the log under that id. No exception text, traceback or
server path ever reaches a client except through `ClientError.message`.
"""

from __future__ import annotations

import re
import uuid

#: Longest error message a client is sent (MAX_ERROR_CHARS of the transcription session).
MAX_ERROR_CHARS = 500

_SEGMENT = r"[^\s\\/'\":,;()\[\]]+"
#: A file path: folders may hold spaces ("/srv/my models/x"), the last segment may not, so
#: the words after a path are never taken for part of its name.
_PATH = re.compile(rf"(?:[A-Za-z]:)?(?:[\\/](?:{_SEGMENT}(?: {_SEGMENT})*(?=[\\/])|{_SEGMENT}))+[\\/]?")


def new_error_id() -> str:
    return "err_" + uuid.uuid4().hex[:16]


def scrub(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Reduce server paths in `message` to their base names and cut it to `limit` characters."""

    def base(match: re.Match[str]) -> str:
        # Both separators, whatever the server's OS: a Windows path in a message is a path too.
        return re.split(r"[\\/]", match.group(0).rstrip("/\\"))[-1] or match.group(0)

    text = _PATH.sub(base, message).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def with_error_id(what: str, error_id: str | None) -> str:
    """The one way a client is told of a server fault: what failed, and the id it is logged under."""
    return f"{what} (error id {error_id})." if error_id else f"{what}."


class DragomanError(Exception):
    """Base of every error the project raises on purpose."""

    #: OpenAI-style error type sent on the wire.
    type: str = "server_error"
    #: Short machine-readable code.
    code: str = "server_error"

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.param = param


class ClientError(DragomanError):
    """The request was at fault; `message` is safe to show the client."""

    type = "invalid_request_error"
    code = "invalid_request_error"
    status = 400


class InvalidEvent(ClientError):
    """A client event that cannot be parsed or is of an unknown type."""

    code = "invalid_event"


class InvalidValue(ClientError):
    """A field holds a value outside what the protocol allows."""

    code = "invalid_value"


class InvalidAudio(ClientError):
    """An audio payload that is not valid base64 PCM16."""

    code = "invalid_audio"


class BufferTooLong(ClientError):
    """An append would take the item past its cap."""

    code = "input_audio_buffer_too_long"


class RequestRejected(ClientError):
    """An engine refused a request as invalid (an HTTP 4xx), e.g. an unsupported language."""

    code = "request_rejected"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(scrub(message), param=param)


class MessageTooBig(ClientError):
    """A WebSocket message past the server's limit (the connection then closes with 1009)."""

    code = "message_too_big"


class InvalidFile(ClientError):
    """An uploaded file that is not audio this server can decode."""

    code = "invalid_file"


class FileTooLarge(ClientError):
    """An upload past the server's size limit (HTTP 413)."""

    code = "file_too_large"
    status = 413


class IdleTimeout(ClientError):
    """The client sent nothing for longer than the server waits."""

    code = "idle_timeout"


class ServerError(DragomanError):
    """Our fault. Clients see `public_message` and `error_id`, never the details."""

    type = "server_error"
    code = "server_error"

    def __init__(self, message: str, *, code: str | None = None, error_id: str | None = None) -> None:
        super().__init__(message, code=code)
        self.error_id = error_id or new_error_id()

    @property
    def public_message(self) -> str:
        return with_error_id("The server failed to process the request", self.error_id)


class EngineFailure(ServerError):
    """An engine step failed for a reason that is not the request's fault."""

    code = "engine_failure"


class ShuttingDown(ServerError):
    """The server is stopping (SIGTERM): sessions are closed with 1001 (going away)."""

    code = "server_shutting_down"

    @property
    def public_message(self) -> str:
        return "The server is shutting down; reconnect to another instance or in a moment."


class ModelUnavailable(ServerError):
    """A model's files are missing or fail their checksum."""

    code = "model_unavailable"


class ConfigError(DragomanError):
    """Invalid server configuration (a startup error, never sent to a client)."""

    code = "config_error"
