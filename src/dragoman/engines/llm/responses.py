"""The "responses" LLM backend: a remote server's OpenAI Responses API (`/v1/responses`).

For servers that have it (OpenAI, vLLM); llama.cpp's Python server does not. Text
comes as `response.output_text.delta` events and goes through `MarkupFilter` like
the chat backend's (a server that leaves its model's markup in the text); function
calls come as output items, passed on when `response.output_item.done` closes
each. Requests are sent with `store=False`: the conversation lives in the agent,
not on the server.
"""

from __future__ import annotations

from collections.abc import Callable
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
from dragoman.engines.llm.openai_format import responses_input, responses_tool_choice, responses_tools
from dragoman.engines.llm.remote import LLMServerError, RemoteClient
from dragoman.engines.workers import CancelToken
from dragoman.logs import get_logger

log = get_logger(__name__)


class ResponsesEngine:
    def __init__(self, settings: LLMSettings) -> None:
        self._remote = RemoteClient(settings, "responses")
        self.name = settings.remote_model or "remote-llm"
        self.capabilities = self._remote.capabilities

    def stream(self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None]) -> Finished:
        with self._remote.errors():
            response = self._remote.client.responses.create(**self._arguments(request))
            with response:
                return EventReader(request, cancel, emit, self._remote.where).read(response)

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self._remote.model,
            "input": responses_input(request.messages),
            "stream": True,
            "store": False,
            "temperature": request.temperature,
        }
        if request.max_tokens is not None:
            arguments["max_output_tokens"] = request.max_tokens
        if request.tools:
            arguments["tools"] = responses_tools(request.tools)
            arguments["tool_choice"] = responses_tool_choice(request.tool_choice)
        return arguments

    def warm_up(self) -> None:
        # 16: the Responses API refuses smaller caps.
        request = ChatRequest(messages=(ChatMessage("user", "Hi"),), max_tokens=16)
        self.stream(request, CancelToken(), lambda piece: None)

    def describe(self) -> EngineInfo:
        return self._remote.describe(self.name)

    def forget(self, conversation: str) -> None:
        """Nothing is kept here (`store=False`)."""

    def close(self) -> None:
        self._remote.close()


class EventReader:
    """One streamed response, read into pieces."""

    def __init__(
        self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None], where: str
    ) -> None:
        self._cancel = cancel
        self._emit = emit
        self._where = where
        self._markup = MarkupFilter(request.tools, parse_calls=True)
        self._text_calls = request.tool_choice != "none"
        self._calls = 0

    def read(self, events: Any) -> Finished:
        reason: FinishReason = "stop"
        usage: Any = None
        for event in events:
            if self._cancel.cancelled:
                return _finished("cancelled", usage)
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                self._send(self._markup.feed(event.delta))
            elif kind == "response.output_item.done" and getattr(event.item, "type", "") == "function_call":
                self._send_call(event.item)
            elif kind in ("response.completed", "response.incomplete"):
                usage = event.response.usage
                details = getattr(event.response, "incomplete_details", None)
                if kind == "response.incomplete" and getattr(details, "reason", "") == "max_output_tokens":
                    reason = "length"
            elif kind in ("response.failed", "error"):
                raise LLMServerError(f"the LLM server at {self._where} failed the response")
        self._send(self._markup.finish())
        if reason == "stop" and self._calls:
            reason = "tool_calls"
        return _finished(reason, usage)

    def _send_call(self, item: Any) -> None:
        try:
            arguments = normalize_arguments(item.arguments or "")
        except ValueError:
            log.warning("llm server sent a tool call whose arguments are not JSON", tool=item.name)
            return
        self._calls += 1
        self._emit(ToolCallPiece(ToolCall(item.call_id or new_call_id(), item.name, arguments)))

    def _send(self, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, str):
                self._emit(TextPiece(event))
            elif isinstance(event, ToolCall) and self._text_calls:
                self._calls += 1
                self._emit(ToolCallPiece(event))


def _finished(reason: FinishReason, usage: Any) -> Finished:
    details = getattr(usage, "input_tokens_details", None)
    return Finished(
        reason=reason,
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
    )


def create(settings: LLMSettings, cache_dir: Path) -> ResponsesEngine:
    """The registry's factory: `llm.base_url`, `llm.api_key` and `llm.remote_model` name the server."""
    return ResponsesEngine(settings)
