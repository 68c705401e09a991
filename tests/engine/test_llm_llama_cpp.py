"""The embedded LLM on the packaged Qwen2.5-Coder-0.5B: text, tool calls, KV reuse, cancellation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from dragoman.config import LLMSettings
from dragoman.engines.llama_amx import AMX_VARIANTS
from dragoman.engines.llm.base import (
    ChatMessage,
    ChatRequest,
    ContextLengthExceeded,
    Finished,
    ForcedTool,
    LLMEngine,
    LLMPiece,
    TextPiece,
    ToolCall,
    ToolCallPiece,
    ToolSpec,
)
from dragoman.engines.llm.llama_cpp import LlamaCppEngine, create
from dragoman.engines.workers import CancelToken
from dragoman.errors import InvalidValue

pytestmark = pytest.mark.engine

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather in a city",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
HANG_UP = ToolSpec("hang_up", "End the phone call", {"type": "object", "properties": {}})
SYSTEM = ChatMessage("system", "You are a helpful voice assistant. Answer in one short sentence.")
#: What must never reach TTS.
MARKUP = re.compile(r"<tool_call>|</tool_call>|<\|[a-z_]+\|>|```|\{\s*\"")


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[LlamaCppEngine]:
    built = create(LLMSettings(model="qwen2.5-0.5b-instruct-gguf"), cache_dir)
    built.warm_up()
    yield built
    built.close()


def run(
    engine: LLMEngine, request: ChatRequest, cancel: CancelToken | None = None
) -> tuple[str, list[ToolCall], Finished]:
    pieces: list[LLMPiece] = []
    finished = engine.stream(request, cancel or CancelToken(), pieces.append)
    text = "".join(p.text for p in pieces if isinstance(p, TextPiece))
    calls = [p.call for p in pieces if isinstance(p, ToolCallPiece)]
    assert not MARKUP.search(text), text
    return text, calls, finished


def ask(question: str, **kwargs: object) -> ChatRequest:
    return ChatRequest(messages=(SYSTEM, ChatMessage("user", question)), **kwargs)  # type: ignore[arg-type]


def test_it_is_an_llm_engine(engine: LlamaCppEngine) -> None:
    assert isinstance(engine, LLMEngine)
    caps = engine.capabilities
    assert caps.tools and caps.constrained_arguments and caps.prefix_cache and not caps.remote
    assert caps.context_tokens == 4096
    info = engine.describe()
    # The packaged Q4_K_M, or on the AMX kernels its Q8_0 copy (engines/llama_amx.py).
    weights = "q8_0" if engine.kernels in AMX_VARIANTS else "q4_k_m"
    assert (info.name, info.backend, info.compute_type) == (
        "qwen2.5-0.5b-instruct-gguf",
        "llama-cpp",
        weights,
    )


def test_answers_a_question_in_text(engine: LlamaCppEngine) -> None:
    text, calls, finished = run(engine, ask("What is the capital of France?"))
    assert "Paris" in text and not calls
    assert finished.reason == "stop" and finished.output_tokens > 2 and finished.input_tokens > 20


def test_calls_a_tool_with_arguments_valid_for_its_schema(engine: LlamaCppEngine) -> None:
    _, calls, finished = run(
        engine, ask("What's the weather like in Paris right now?", tools=(WEATHER, HANG_UP))
    )
    assert finished.reason == "tool_calls"
    [call] = calls
    assert call.name == "get_weather" and re.fullmatch(r"call_[A-Za-z0-9]{24}", call.call_id)
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, WEATHER.parameters)
    assert "paris" in arguments["city"].lower()


@pytest.mark.parametrize("choice", ["required", ForcedTool("get_weather")])
def test_a_required_or_forced_call_comes_first(engine: LlamaCppEngine, choice: object) -> None:
    request = ask("Is it going to rain in Berlin today?", tools=(WEATHER, HANG_UP), tool_choice=choice)
    text, calls, finished = run(engine, request)
    assert text == "" and finished.reason == "tool_calls"
    assert calls and calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER.parameters)


def test_tool_choice_none_answers_in_text(engine: LlamaCppEngine) -> None:
    text, calls, finished = run(
        engine, ask("What's the weather in Paris?", tools=(WEATHER,), tool_choice="none")
    )
    assert not calls and "Paris" in text and finished.reason == "stop"


def test_a_tool_result_is_answered_in_text(engine: LlamaCppEngine) -> None:
    """With `llm.tool_result_note` (on by default): without it the 0.5B calls the tool again."""
    question = ask("What's the weather like in Paris right now?", tools=(WEATHER,), conversation="weather")
    _, [call], first = run(engine, question)
    messages = (
        *question.messages,
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", '{"temperature_celsius": 21, "sky": "sunny"}', tool_call_id=call.call_id),
    )
    text, calls, second = run(engine, ChatRequest(messages, tools=(WEATHER,), conversation="weather"))
    assert not calls and "21" in text and second.reason == "stop"
    # The first turn was not prefilled again, nor most of the call (its ~20 tokens; the last may
    # re-tokenize differently once the template writes the closing tag after it).
    assert second.cached_tokens >= first.input_tokens + 10, (first, second)
    engine.forget("weather")


def test_interleaved_conversations_reuse_their_own_kv_cache(engine: LlamaCppEngine) -> None:
    chats = {
        "alice": [
            ChatMessage("system", "You are Alice's assistant."),
            ChatMessage("user", "Hi, my name is Alice."),
        ],
        "bob": [
            ChatMessage("system", "You are a friendly assistant for Bob."),
            ChatMessage("user", "Hello, I am Bob."),
        ],
    }
    turns: dict[str, list[tuple[str, Finished]]] = {"alice": [], "bob": []}
    for _ in range(2):  # alice, bob, alice, bob: each second turn follows the other conversation's
        for key, messages in chats.items():
            text, _, finished = run(engine, ChatRequest(tuple(messages), conversation=key, max_tokens=24))
            turns[key].append((text, finished))
            messages += [ChatMessage("assistant", text), ChatMessage("user", "What is my name?")]
    for key, name in (("alice", "Alice"), ("bob", "Bob")):
        (_, first), (answer, second) = turns[key]
        # System prompt and the whole first turn came from this conversation's own cache.
        assert second.cached_tokens >= first.input_tokens, (key, first, second)
        assert second.input_tokens - second.cached_tokens < 30
        assert name in answer, (key, answer)
    # The first turns shared only the template's opening tokens.
    assert turns["bob"][0][1].cached_tokens < 10

    engine.forget("alice")
    engine.forget("bob")
    _, _, again = run(engine, ChatRequest(tuple(chats["alice"][:2]), conversation="alice", max_tokens=4))
    assert again.cached_tokens < again.input_tokens // 2  # forgotten: prefilled again


def test_cancel_stops_within_a_token(engine: LlamaCppEngine) -> None:
    story = ask("Tell me a long story about a dragon and a knight.", max_tokens=40)
    _, _, full = run(engine, story)
    assert full.output_tokens == 40 and full.reason == "length"

    cancel = CancelToken()
    pieces: list[LLMPiece] = []

    def emit(piece: LLMPiece) -> None:
        pieces.append(piece)
        cancel.cancel()

    finished = engine.stream(story, cancel, emit)
    assert finished.reason == "cancelled" and len(pieces) == 1
    assert finished.output_tokens <= 2

    early = CancelToken()
    early.cancel()  # set before the turn: nothing is prefilled or generated
    _, _, nothing = run(engine, story, early)
    assert (nothing.reason, nothing.output_tokens) == ("cancelled", 0)
    assert nothing.cached_tokens >= nothing.input_tokens - 2  # the same prompt was just cached


def test_bad_requests_are_the_clients_fault(engine: LlamaCppEngine) -> None:
    with pytest.raises(InvalidValue, match="tool_choice"):
        run(engine, ask("Hi", tools=(WEATHER,), tool_choice=ForcedTool("nope")))
    with pytest.raises(InvalidValue, match="required"):
        run(engine, ask("Hi", tool_choice="required"))
    with pytest.raises(ContextLengthExceeded):
        run(engine, ask("word " * 5000))
    # The engine still works afterwards.
    assert run(engine, ask("Say OK.", max_tokens=3))[2].output_tokens > 0


def test_a_long_answer_ends_whole_at_its_soft_length(engine: LlamaCppEngine) -> None:
    story = ChatMessage("system", "You tell long, detailed stories of at least ten sentences.")
    request = ChatRequest(
        messages=(story, ChatMessage("user", "Tell me a story about a lighthouse keeper.")),
        max_tokens=200,
        answer_tokens=24,
    )
    text, _, finished = run(engine, request)
    assert finished.reason == "stop", (finished, text)
    assert text.rstrip().endswith((".", "!", "?", '"', "”")), text
    assert finished.output_tokens < 24 + 40, finished


def test_the_default_instructions_are_cached_for_every_new_conversation(engine: LlamaCppEngine) -> None:
    engine.warm_up(SYSTEM.content)
    # Another conversation, with other instructions, holds the sequence now.
    pirate = (ChatMessage("system", "You are a pirate."), ChatMessage("user", "Ahoy!"))
    run(engine, ChatRequest(pirate, conversation="pirate", max_tokens=4))
    text, _, first = run(engine, ask("What is the capital of Italy?", conversation="new", max_tokens=24))
    assert "Rome" in text, text
    # The instructions came from the start-up cache, not only the template's opening tokens.
    assert first.cached_tokens >= 15, first
    assert first.input_tokens - first.cached_tokens < 25, first
    engine.forget("pirate")
    engine.forget("new")
