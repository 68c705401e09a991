"""What the remote LLM backends share: the `openai` client, the engine's life cycle, and errors.

A remote backend talks to an OpenAI-compatible server (vLLM, llama.cpp's server,
OpenAI) with the `openai` SDK. `RemoteEngine` is the engine contract around one
streamed call; each API (`chat_completions.py`, `responses.py`) says how to ask and
how to read what streams back, and passes text and calls on through one
`PieceSender`. Failures become `ServerError`s whose message names the server by its
address with any credentials cut out; the SDK's own exception text, which may quote
the request, only goes to the log as the cause.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import openai

from dragoman.config import LLMSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.base import (
    ChatMessage,
    ChatRequest,
    ContextLengthExceeded,
    Finished,
    LLMCapabilities,
    LLMPiece,
    TextPiece,
    ToolCall,
    ToolCallPiece,
)
from dragoman.engines.llm.calls import new_call_id, normalize_arguments
from dragoman.engines.llm.markup import MarkupFilter
from dragoman.engines.llm.reply_guard import ReplyGuard
from dragoman.engines.workers import CancelToken
from dragoman.errors import ConfigError, EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)


class LLMServerUnavailable(EngineFailure):
    """The LLM server cannot be reached or did not answer in time."""

    code = "llm_server_unavailable"


class LLMServerError(EngineFailure):
    """The LLM server answered with an error."""

    code = "llm_server_error"


def safe_url(url: str) -> str:
    """`url` without user, password, query or fragment: safe for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class RemoteClient:
    """The SDK client of one server, and the model it serves (asked of the server when unset)."""

    def __init__(self, settings: LLMSettings, backend: str) -> None:
        if not settings.base_url:
            raise ConfigError(f"the {backend} LLM backend needs llm.base_url")
        self.backend = backend
        self.where = safe_url(settings.base_url)
        self.client = openai.OpenAI(
            base_url=settings.base_url,
            # The SDK insists on a key; servers without authentication ignore this one.
            api_key=settings.api_key or "unused",
            timeout=settings.timeout_s,
            max_retries=1,
        )
        self._model = settings.remote_model
        self._lock = threading.Lock()
        self.capabilities = LLMCapabilities(
            tools=True,
            # The server may constrain arguments (vLLM does with `tool_choice` set) but does not say.
            constrained_arguments=False,
            prefix_cache=False,
            context_tokens=settings.context_tokens,
            remote=True,
        )

    @property
    def model(self) -> str:
        """The model to ask for: `llm.remote_model`, else the first the server lists."""
        with self._lock:
            if not self._model:
                with self.errors():
                    listed = self.client.models.list()
                    first = next(iter(listed), None)
                if first is None:
                    raise LLMServerError(f"the LLM server at {self.where} lists no model")
                self._model = first.id
            return self._model

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Turn the SDK's exceptions into the project's, with clean messages."""
        try:
            yield
        except openai.APITimeoutError as exc:
            raise LLMServerUnavailable(f"the LLM server at {self.where} did not answer in time") from exc
        except openai.APIConnectionError as exc:
            raise LLMServerUnavailable(f"the LLM server at {self.where} cannot be reached") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 400 and _says_context(exc):
                raise ContextLengthExceeded(
                    "the conversation does not fit the model's context", param="messages"
                ) from exc
            raise LLMServerError(f"the LLM server at {self.where} answered HTTP {exc.status_code}") from exc
        except openai.OpenAIError as exc:
            raise LLMServerError(
                f"the LLM server at {self.where} sent an answer that cannot be read"
            ) from exc

    def describe(self, name: str) -> EngineInfo:
        return EngineInfo(
            name=name, backend=self.backend, device="remote", compute_type="remote", compute_reason=self.where
        )

    def close(self) -> None:
        self.client.close()


class RemoteEngine:
    """An LLM engine that streams each request from a remote server's API."""

    backend: ClassVar[str]
    #: The output cap of the warm-up request: the smallest the API takes.
    warm_up_tokens: ClassVar[int] = 1

    def __init__(self, settings: LLMSettings) -> None:
        self._remote = RemoteClient(settings, self.backend)
        self.name = settings.remote_model or "remote-llm"
        self.capabilities = self._remote.capabilities

    def stream(self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None]) -> Finished:
        with self._remote.errors():
            response = self._call(request)
            with response:
                return self._read(request, response, cancel, PieceSender(request, emit))

    def _call(self, request: ChatRequest) -> Any:
        """The streaming API call for `request` (the SDK's stream, a context manager)."""
        raise NotImplementedError

    def _read(self, request: ChatRequest, stream: Any, cancel: CancelToken, send: PieceSender) -> Finished:
        """Read the stream into `send` until it ends, or until `cancel` is set."""
        raise NotImplementedError

    def warm_up(self, instructions: str = "") -> None:
        request = ChatRequest(messages=(ChatMessage("user", "Hi"),), max_tokens=self.warm_up_tokens)
        self.stream(request, CancelToken(), lambda piece: None)

    def describe(self) -> EngineInfo:
        return self._remote.describe(self.name)

    def forget(self, conversation: str) -> None:
        """Nothing is kept here: the server's own prefix cache manages itself."""

    def close(self) -> None:
        self._remote.close()


class PieceSender:
    """Passes a remote answer on as pieces: its text through `ReplyGuard` (a repetition loop
    cut, a long spoken answer ended at a sentence, as on llama.cpp here) and `MarkupFilter`
    (which cuts out, and parses, a call the server left in the text), and its calls, counted.

    The guard works on tokens, and a server streams about one token a delta (llama.cpp's
    server and vLLM send exactly one): each distinct delta is a token to it.
    """

    def __init__(self, request: ChatRequest, emit: Callable[[LLMPiece], None]) -> None:
        self._emit = emit
        self._markup = MarkupFilter(request.tools, parse_calls=True)
        #: Under tool_choice "none" a call written as text is cut out and not passed on.
        self._text_calls = request.tool_choice != "none"
        self.calls = 0
        self._ids: dict[str, int] = {}
        self._deltas: list[str] = []
        self._guard = ReplyGuard(self._deltas.__getitem__, answer_tokens=request.answer_tokens)
        #: The guard ended the reply: what streams after it is not said, nor read.
        self.ended = False

    def text(self, delta: str) -> bool:
        """Pass on what `delta` lets the guard release; True once the reply has ended here."""
        if self.ended:
            return True
        token = self._ids.setdefault(delta, len(self._deltas))
        if token == len(self._deltas):
            self._deltas.append(delta)
        step = self._guard.feed(token)
        self._release(step.release)
        self.ended = step.ended or step.keep is not None
        return self.ended

    def end_of_text(self) -> None:
        """The text has ended: pass on what the guard and the filter held back."""
        if not self.ended:
            self._release(self._guard.flush())
        self._send(self._markup.finish())

    def _release(self, tokens: tuple[int, ...]) -> None:
        if tokens:
            self._send(self._markup.feed("".join(self._deltas[t] for t in tokens)))

    def call(self, call_id: str, name: str, arguments: str) -> None:
        """A call the API returned as such; dropped, with a warning, when its arguments are not JSON."""
        try:
            normalized = normalize_arguments(arguments)
        except ValueError:
            log.warning("llm server sent a tool call whose arguments are not JSON", tool=name)
            return
        if name:
            self._send_call(ToolCall(call_id or new_call_id(), name, normalized))

    def _send(self, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, str):
                self._emit(TextPiece(event))
            elif isinstance(event, ToolCall) and self._text_calls:
                self._send_call(event)

    def _send_call(self, call: ToolCall) -> None:
        self.calls += 1
        self._emit(ToolCallPiece(call))


def _says_context(exc: openai.APIStatusError) -> bool:
    text = str(exc).lower()
    return "context" in text and ("length" in text or "window" in text or "maximum" in text)
