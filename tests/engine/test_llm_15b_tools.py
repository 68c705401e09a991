"""The 1.5B, the agent's brain where `auto` measures it fast enough, calls the tools offered
when asked for what they do, and answers other questions in text, under the server's default
instructions and under a client's own, with the agent's tool preamble and the call gate
(`engines/llm/call_gate.py`).

Under "You are a helpful voice AI assistant." (what LiveKit, pipecat and Agents SDK examples
send) and the old preamble, the 1.5B called a tool for every plain question. The questions here
are none of the gate's calibration set.
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
#: The server's own instructions (a session that sets none), and a client's.
INSTRUCTIONS = {
    "server": AgentSettings().instructions,
    "client": "You are a helpful voice AI assistant.",
}


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[LlamaCppEngine]:
    built = create(LLMSettings(model="qwen2.5-1.5b-instruct-gguf"), cache_dir)
    yield built
    built.close()


def answer(
    engine: LlamaCppEngine, instructions: str, question: str, history: tuple[ChatMessage, ...] = ()
) -> tuple[str, list[ToolCallPiece]]:
    """One turn as an agent session asks it when tools are offered: the instructions and the
    tool preamble (`sessions.agent.requests.chat_request`), tool_choice "auto"."""
    system = f"{instructions}\n\n{AgentSettings().tool_preamble}"
    request = ChatRequest(
        (ChatMessage("system", system), *history, ChatMessage("user", question)),
        tools=(WEATHER, LIGHT),
        max_tokens=80,
        answer_tokens=60,
    )
    pieces: list[LLMPiece] = []
    engine.stream(request, CancelToken(), pieces.append)
    text = "".join(p.text for p in pieces if isinstance(p, TextPiece))
    return text, [p for p in pieces if isinstance(p, ToolCallPiece)]


@pytest.mark.parametrize("who", INSTRUCTIONS)
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
    engine: LlamaCppEngine, who: str, question: str, tool: str, argument: str, value: object
) -> None:
    text, calls = answer(engine, INSTRUCTIONS[who], question)
    assert len(calls) == 1, f"no call, said: {text!r}"
    call = calls[0].call
    got = json.loads(call.arguments)[argument]
    assert call.name == tool and (got.lower() if isinstance(got, str) else got) == value, call
    assert tool not in text, f"the tool's name was spoken: {text!r}"


@pytest.mark.parametrize("who", INSTRUCTIONS)
@pytest.mark.parametrize(
    ("question", "facts"),
    [
        ("What is the capital of France?", ("paris",)),
        ("Who wrote Hamlet?", ("shakespeare",)),
        ("How many minutes are in an hour?", ("60", "sixty")),
        ("What color is the sky on a clear day?", ("blue",)),
        ("Which animal is known as the king of the jungle?", ("lion",)),
        ("How many sides does a triangle have?", ("3", "three")),
    ],
)
def test_a_question_no_tool_serves_is_answered_in_text(
    engine: LlamaCppEngine, who: str, question: str, facts: tuple[str, ...]
) -> None:
    text, calls = answer(engine, INSTRUCTIONS[who], question)
    assert not calls, (text, [c.call for c in calls])
    assert any(fact in text.lower() for fact in facts), text


#: An earlier turn answered in words, which pulls the model's next answers towards words too.
EARLIER = (
    ChatMessage("user", "What is the capital of Italy?"),
    ChatMessage("assistant", "The capital of Italy is Rome."),
)


@pytest.mark.parametrize("who", INSTRUCTIONS)
def test_after_an_answer_in_words_a_tool_request_still_calls(engine: LlamaCppEngine, who: str) -> None:
    text, calls = answer(engine, INSTRUCTIONS[who], "What's the weather in Lisbon right now?", EARLIER)
    assert len(calls) == 1, f"no call, said: {text!r}"
    call = calls[0].call
    assert call.name == "get_weather" and json.loads(call.arguments)["city"].lower() == "lisbon", call


@pytest.mark.parametrize("who", INSTRUCTIONS)
def test_after_an_answer_in_words_a_question_is_answered_in_words(engine: LlamaCppEngine, who: str) -> None:
    text, calls = answer(engine, INSTRUCTIONS[who], "Who discovered penicillin?", EARLIER)
    assert not calls and "fleming" in text.lower(), (text, [c.call for c in calls])
