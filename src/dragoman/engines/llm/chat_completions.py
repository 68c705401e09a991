"""The "chat-completions" LLM backend: a remote OpenAI-compatible server's `/v1/chat/completions`.

Text deltas are spoken as they stream; tool calls come two ways and both are taken:
as the API's streamed `tool_calls` (assembled by index, each passed on as soon as
the next one starts or the stream ends), or, from servers that do not parse their
model's tool-call format (llama.cpp's server with `tool_choice` "auto", vLLM
without a tool parser), as markup in the text, which `MarkupFilter` cuts out and
parses. Usage comes from the last chunk where the server sends it
(`stream_options.include_usage`); servers that send none report 0 tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.config import LLMSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.base import (
    ChatMessage,
    ChatRequest,
    Finished,
    FinishReason,
    LLMPiece,
    TextPiece,
    ToolCall,
    ToolCallPiece,
)
from dragoman.engines.llm.calls import new_call_id, normalize_arguments
from dragoman.engines.llm.markup import MarkupFilter
from dragoman.engines.llm.openai_format import chat_messages, chat_tool_choice, chat_tools
from dragoman.engines.llm.remote import RemoteClient
from dragoman.engines.workers import CancelToken
from dragoman.logs import get_logger

log = get_logger(__name__)


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    sent: bool = False


class ChatCompletionsEngine:
    def __init__(self, settings: LLMSettings) -> None:
        self._remote = RemoteClient(settings, "chat-completions")
        self.name = settings.remote_model or "remote-llm"
        self.capabilities = self._remote.capabilities

    def stream(self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None]) -> Finished:
        with self._remote.errors():
            response = self._remote.client.chat.completions.create(**self._arguments(request))
            with response:
                return ChunkReader(request, cancel, emit).read(response)

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self._remote.model,
            "messages": chat_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": request.temperature,
        }
        if request.max_tokens is not None:
            arguments["max_tokens"] = request.max_tokens
        if request.tools:
            arguments["tools"] = chat_tools(request.tools)
            arguments["tool_choice"] = chat_tool_choice(request.tool_choice)
        return arguments

    def warm_up(self) -> None:
        request = ChatRequest(messages=(ChatMessage("user", "Hi"),), max_tokens=1)
        self.stream(request, CancelToken(), lambda piece: None)

    def describe(self) -> EngineInfo:
        return self._remote.describe(self.name)

    def forget(self, conversation: str) -> None:
        """Nothing is cached here; the server's own prefix cache manages itself."""

    def close(self) -> None:
        self._remote.close()


class ChunkReader:
    """One streamed completion, read into pieces."""

    def __init__(self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None]) -> None:
        self._request = request
        self._cancel = cancel
        self._emit = emit
        self._markup = MarkupFilter(request.tools, parse_calls=True)
        #: Under tool_choice "none" a call written as text is cut out and not passed on.
        self._text_calls = request.tool_choice != "none"
        self._partials: dict[int, _PartialCall] = {}
        self._calls = 0

    def read(self, response: Any) -> Finished:
        finish: str | None = None
        usage: Any = None
        for chunk in response:
            if self._cancel.cancelled:
                return self._finished("cancelled", usage)
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                delta = choice.delta
                if delta is not None and delta.content:
                    self._send(self._markup.feed(delta.content))
                for part in (delta.tool_calls if delta is not None else None) or []:
                    self._add_part(part)
                if choice.finish_reason:
                    finish = choice.finish_reason
        self._send(self._markup.finish())
        for index in sorted(self._partials):
            self._send_call(self._partials[index])
        reason: FinishReason = "length" if finish == "length" else "tool_calls" if self._calls else "stop"
        return self._finished(reason, usage)

    def _add_part(self, part: Any) -> None:
        index = int(part.index or 0)
        if index not in self._partials:
            # A new index: the calls before it are complete.
            for earlier in sorted(self._partials):
                self._send_call(self._partials[earlier])
            self._partials[index] = _PartialCall()
        partial = self._partials[index]
        if part.id:
            partial.call_id = part.id
        if part.function is not None:
            name = part.function.name or ""
            # OpenAI sends the name once; llama.cpp's Python server repeats it in every delta.
            if name != partial.name:
                partial.name += name
            partial.arguments += part.function.arguments or ""

    def _send_call(self, partial: _PartialCall) -> None:
        if partial.sent:
            return
        partial.sent = True
        try:
            arguments = normalize_arguments(partial.arguments)
        except ValueError:
            log.warning("llm server sent a tool call whose arguments are not JSON", tool=partial.name)
            return
        if not partial.name:
            return
        self._calls += 1
        self._emit(ToolCallPiece(ToolCall(partial.call_id or new_call_id(), partial.name, arguments)))

    def _send(self, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, str):
                self._emit(TextPiece(event))
            elif isinstance(event, ToolCall) and self._text_calls:
                self._calls += 1
                self._emit(ToolCallPiece(event))

    def _finished(self, reason: FinishReason, usage: Any) -> Finished:
        details = getattr(usage, "prompt_tokens_details", None)
        return Finished(
            reason=reason,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        )


def create(settings: LLMSettings, cache_dir: Path) -> ChatCompletionsEngine:
    """The registry's factory: `llm.base_url`, `llm.api_key` and `llm.remote_model` name the server."""
    return ChatCompletionsEngine(settings)
