"""The 1.5B, the agent's brain where `auto` measures it fast enough, calls the tools offered
under the agent's default instructions and tool preamble (with what each tool is for, as a
session sends them), and answers other questions in text.

Qwen2.5-Coder-1.5B tended to tell the user how to call a tool ("call the `get_weather` function
with ...") instead of calling it; `AgentSettings.tool_preamble` is worded against that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.config import AgentSettings, LLMSettings
from dragoman.engines.llm.base import ChatMessage, ChatRequest, LLMPiece, TextPiece, ToolCallPiece, ToolSpec
from dragoman.engines.llm.llama_cpp import LlamaCppEngine, create
from dragoman.engines.workers import CancelToken
from dragoman.sessions.agent.requests import tool_guidance

pytestmark = pytest.mark.engine

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
LIGHT = ToolSpec(
    "set_light",
    "Turn the living room light on or off.",
    {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
)


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[LlamaCppEngine]:
    built = create(LLMSettings(model="qwen2.5-1.5b-instruct-gguf"), cache_dir)
    yield built
    built.close()


def answer(engine: LlamaCppEngine, question: str) -> tuple[str, list[ToolCallPiece]]:
    """One turn with the instructions a session that sets none sends when tools are offered
    (`sessions.agent.requests.chat_request`)."""
    settings = AgentSettings()
    system = f"{settings.instructions}\n\n{tool_guidance(settings.tool_preamble, (WEATHER, LIGHT))}"
    request = ChatRequest(
        (ChatMessage("system", system), ChatMessage("user", question)),
        tools=(WEATHER, LIGHT),
        max_tokens=80,
        answer_tokens=60,
    )
    pieces: list[LLMPiece] = []
    engine.stream(request, CancelToken(), pieces.append)
    text = "".join(p.text for p in pieces if isinstance(p, TextPiece))
    return text, [p for p in pieces if isinstance(p, ToolCallPiece)]


@pytest.mark.parametrize(
    ("question", "tool", "argument", "value"),
    [
        ("What is the weather in Paris right now?", "get_weather", "city", "paris"),
        ("Is it raining in London?", "get_weather", "city", "london"),
        ("How warm is it in Rome today?", "get_weather", "city", "rome"),
        ("Turn off the light, please.", "set_light", "on", False),
    ],
)
def test_a_request_a_tool_serves_calls_it(
    engine: LlamaCppEngine, question: str, tool: str, argument: str, value: object
) -> None:
    text, calls = answer(engine, question)
    assert len(calls) == 1, f"no call, said: {text!r}"
    call = calls[0].call
    got = json.loads(call.arguments)[argument]
    assert call.name == tool and (got.lower() if isinstance(got, str) else got) == value, call
    assert tool not in text, f"the tool's name was spoken: {text!r}"


@pytest.mark.parametrize(
    ("question", "fact"),
    [("What is the capital of France?", "paris"), ("Who wrote Hamlet?", "shakespeare")],
)
def test_a_question_no_tool_serves_is_answered_in_text(
    engine: LlamaCppEngine, question: str, fact: str
) -> None:
    text, calls = answer(engine, question)
    assert not calls and fact in text.lower(), (text, calls)
