"""The LLM engine interface of the voice agent.

An engine streams one assistant turn for a chat: the text to speak, piece by piece
as it is generated, and the tool calls the model makes, each whole and with
arguments that parse as JSON. Text pieces carry spoken text only: never tool-call
markup, code fences around a call or special tokens, so the agent can send every
piece to TTS as it comes.

`stream` blocks and runs on the engine's worker thread (`engines.workers`); it
checks the `CancelToken` between tokens, so a barge-in stops the work within one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from dragoman.engines.info import EngineInfo
from dragoman.engines.workers import CancelToken
from dragoman.errors import ClientError

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "cancelled"]


@dataclass(frozen=True)
class LLMCapabilities:
    #: The engine can call tools.
    tools: bool
    #: Tool arguments are grammar/JSON-schema constrained: always valid JSON for the schema.
    constrained_arguments: bool
    #: A conversation's KV cache is kept between turns (`ChatRequest.conversation`).
    prefix_cache: bool
    #: Most tokens one conversation (prompt and reply) may hold.
    context_tokens: int
    #: An OpenAI-compatible server does the work.
    remote: bool


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    #: JSON Schema of the arguments object.
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCall:
    #: `call_` and random letters, like OpenAI's.
    call_id: str
    name: str
    #: JSON text of the arguments object.
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str = ""
    #: An assistant's calls.
    tool_calls: tuple[ToolCall, ...] = ()
    #: The call a tool message answers.
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ForcedTool:
    """Call this tool now."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedTool


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    #: Most tokens to generate; None: up to the context. A reply cut by it ends "length".
    max_tokens: int | None = None
    #: A spoken answer's soft length: past this many tokens the reply ends at the next sentence
    #: end, finish reason "stop" (None: none). Backends that cannot stop there ignore it.
    answer_tokens: int | None = None
    #: 0 is greedy: small models call tools most reliably that way, and a reply can be
    #: reproduced from the log. Raise it for livelier chat.
    temperature: float = 0.0
    #: The conversation (a session id) whose KV cache this turn may reuse; None: no reuse.
    conversation: str | None = None


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class ToolCallPiece:
    call: ToolCall


@dataclass(frozen=True)
class Finished:
    reason: FinishReason
    input_tokens: int
    output_tokens: int
    #: Prompt tokens NOT prefilled again thanks to the cache.
    cached_tokens: int


LLMPiece = TextPiece | ToolCallPiece


class ContextLengthExceeded(ClientError):
    """The conversation no longer fits the model's context: drop old turns and ask again."""

    code = "context_length_exceeded"


@runtime_checkable
class LLMEngine(Protocol):
    name: str
    capabilities: LLMCapabilities

    def stream(self, request: ChatRequest, cancel: CancelToken, emit: Callable[[LLMPiece], None]) -> Finished:
        """Generate one assistant turn, blocking; runs on the engine's worker thread.

        Calls `emit` for each piece as it is generated, checks `cancel` between tokens
        (cancelled work stops within one token) and returns `Finished`, with reason
        "cancelled" when the token was set. A bad request raises a `ClientError`, a
        failure of ours a `ServerError`.
        """
        ...

    def warm_up(self, instructions: str = "") -> None:
        """One short real call, so that the first session does not pay for lazy set-up; an
        engine with a prefix cache keeps the default `instructions` ready for every conversation."""
        ...

    def describe(self) -> EngineInfo:
        """Name, backend, device and compute type, for /health and the start-up log."""
        ...

    def forget(self, conversation: str) -> None:
        """Drop what is cached for a closed conversation."""
        ...

    def close(self) -> None:
        """Release the model or the connection."""
        ...
