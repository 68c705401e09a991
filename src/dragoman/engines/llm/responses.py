"""The "responses" LLM backend: a remote server's OpenAI Responses API (`/v1/responses`).

For servers that have it (OpenAI, vLLM); llama.cpp's Python server does not. Text
comes as `response.output_text.delta` events and goes through `MarkupFilter` like
the chat backend's (a server that leaves its model's markup in the text); function
calls come as output items, passed on when `response.output_item.done` closes
each. Requests are sent with `store=False`: the conversation lives in the agent,
not on the server. A stream that ends with neither `response.completed` nor
`response.incomplete` was cut short: `LLMServerError`, as the chat backend's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dragoman.config import LLMSettings
from dragoman.engines.llm.base import ChatRequest, Finished, FinishReason
from dragoman.engines.llm.openai_format import responses_input, responses_tool_choice, responses_tools
from dragoman.engines.llm.remote import LLMServerError, PieceSender, RemoteEngine
from dragoman.engines.workers import CancelToken


class ResponsesEngine(RemoteEngine):
    backend = "responses"
    #: The Responses API refuses smaller caps.
    warm_up_tokens = 16

    def _call(self, request: ChatRequest) -> Any:
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
        return self._remote.client.responses.create(**arguments)

    def _read(self, request: ChatRequest, stream: Any, cancel: CancelToken, send: PieceSender) -> Finished:
        return EventReader(cancel, send, self._remote.where).read(stream)


class EventReader:
    """One streamed response, read into pieces."""

    def __init__(self, cancel: CancelToken, send: PieceSender, where: str) -> None:
        self._cancel = cancel
        self._send = send
        self._where = where

    def read(self, events: Any) -> Finished:
        reason: FinishReason = "stop"
        usage: Any = None
        ended = False
        for event in events:
            if self._cancel.cancelled:
                return _finished("cancelled", usage)
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                if self._send.text(event.delta):
                    break  # the guard ended the reply; leaving the stream stops the server
            elif kind == "response.output_item.done" and getattr(event.item, "type", "") == "function_call":
                self._send.call(event.item.call_id, event.item.name, event.item.arguments or "")
            elif kind in ("response.completed", "response.incomplete"):
                usage = event.response.usage
                ended = True
                details = getattr(event.response, "incomplete_details", None)
                if kind == "response.incomplete" and getattr(details, "reason", "") == "max_output_tokens":
                    reason = "length"
            elif kind in ("response.failed", "error"):
                raise LLMServerError(f"the LLM server at {self._where} failed the response")
        else:
            if self._cancel.cancelled:  # the server may end a stream this side gave up first
                return _finished("cancelled", usage)
            if not ended:  # cut short: no response.completed or .incomplete came
                raise LLMServerError(f"the LLM server at {self._where} ended its stream before the response")
        self._send.end_of_text()
        if reason == "stop" and self._send.calls:
            reason = "tool_calls"
        return _finished(reason, usage)


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
