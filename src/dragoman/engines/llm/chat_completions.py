"""The "chat-completions" LLM backend: a remote OpenAI-compatible server's `/v1/chat/completions`.

Text deltas are spoken as they stream; tool calls come two ways and both are taken:
as the API's streamed `tool_calls` (assembled by index, each passed on as soon as
the next one starts or the stream ends), or, from servers that do not parse their
model's tool-call format (llama.cpp's server with `tool_choice` "auto", vLLM
without a tool parser), as markup in the text, which `MarkupFilter` cuts out and
parses. Usage comes from the last chunk where the server sends it
(`stream_options.include_usage`); servers that send none report 0 tokens (llama-cpp-python's
server among them: its stream carries no usage, whatever is asked).

A stream that ends, `[DONE]` and all, without a `finish_reason` was cut short: llama_cpp.server
does that to the answer under way when another request comes (its `--interrupt_requests`). That
is `LLMServerError`, not an answer that ends quietly where it stopped, or is empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.config import LLMSettings
from dragoman.engines.llm.base import ChatRequest, Finished, FinishReason
from dragoman.engines.llm.openai_format import chat_messages, chat_tool_choice, chat_tools
from dragoman.engines.llm.remote import LLMServerError, PieceSender, RemoteEngine
from dragoman.engines.workers import CancelToken


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    sent: bool = False


class ChatCompletionsEngine(RemoteEngine):
    backend = "chat-completions"

    def _call(self, request: ChatRequest) -> Any:
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
        return self._remote.client.chat.completions.create(**arguments)

    def _read(self, request: ChatRequest, stream: Any, cancel: CancelToken, send: PieceSender) -> Finished:
        return ChunkReader(cancel, send, self._remote.where).read(stream)


class ChunkReader:
    """One streamed completion, read into pieces."""

    def __init__(self, cancel: CancelToken, send: PieceSender, where: str) -> None:
        self._cancel = cancel
        self._send = send
        self._where = where
        self._partials: dict[int, _PartialCall] = {}

    def read(self, response: Any) -> Finished:
        finish: str | None = None
        usage: Any = None
        for chunk in response:
            if self._cancel.cancelled:
                return _finished("cancelled", usage)
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                delta = choice.delta
                if delta is not None and delta.content and self._send.text(delta.content):
                    break  # the guard ended the reply; leaving the stream stops the server
                for part in (delta.tool_calls if delta is not None else None) or []:
                    self._add_part(part)
                if choice.finish_reason:
                    finish = choice.finish_reason
            if self._send.ended:
                break
        else:
            if self._cancel.cancelled:  # the server may end a stream this side gave up first
                return _finished("cancelled", usage)
            if finish is None:
                raise LLMServerError(
                    f"the LLM server at {self._where} ended its stream with no finish_reason"
                )
        self._send.end_of_text()
        for index in sorted(self._partials):
            self._send_call(self._partials[index])
        reason: FinishReason = (
            "length" if finish == "length" else "tool_calls" if self._send.calls else "stop"
        )
        return _finished(reason, usage)

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
        if not partial.sent:
            partial.sent = True
            self._send.call(partial.call_id, partial.name, partial.arguments)


def _finished(reason: FinishReason, usage: Any) -> Finished:
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
