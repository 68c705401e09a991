"""What the server sets for every agent session, and a client cannot change."""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.sessions.speech.config import SessionConfig


@dataclass(frozen=True)
class AgentLimits:
    #: The model name session events report when the client named none.
    model_name: str
    #: The speech front's decoding settings (the server's transcription settings).
    speech: SessionConfig
    #: Most characters of conversation the LLM is shown; the oldest items go first.
    context_chars: int = 12_000
    #: A response's token cap when the client sets none ("inf" is the model's context).
    max_output_tokens: int | None = 512
    #: A spoken answer's soft length when the client sets no cap: it ends at the next sentence end
    #: past this many tokens, completed (None: none).
    answer_tokens: int | None = 48
    #: Added to the instructions of a response that may call tools: a lead-in before the call.
    tool_preamble: str = ""
