"""The remote LLM backends against a real OpenAI-compatible server: llama-cpp-python's own.

`python -m llama_cpp.server` serves the packaged 0.5B GGUF on a free loopback port.
It has `/v1/chat/completions` (tool calls parsed by the server only for a forced
tool; with "auto" they come back as the model's markup in the text, which the
backend parses) but no `/v1/responses`: the responses backend is checked for failing
cleanly there, and meets a real Responses API in LiteLLM's proxy in front of it
(`tests/litellm_proxy.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from dragoman.config import LLMSettings
from dragoman.engines.llm.base import (
    ChatMessage,
    ChatRequest,
    ForcedTool,
    LLMEngine,
    LLMPiece,
    TextPiece,
    ToolCallPiece,
)
from dragoman.engines.llm.chat_completions import ChatCompletionsEngine
from dragoman.engines.llm.remote import LLMServerError
from dragoman.engines.llm.responses import ResponsesEngine
from dragoman.engines.workers import CancelToken
from dragoman.weights import resolve
from harness.llama_server import llama_server
from tests.engine.test_llm_llama_cpp import HANG_UP, MARKUP, SYSTEM, WEATHER
from tests.litellm_proxy import MASTER_KEY, litellm_binary, litellm_proxy

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def base_url(cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = resolve("qwen2.5-0.5b-instruct-gguf", cache_dir)
    with llama_server(model, tmp_path_factory.mktemp("llama-server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def engine(base_url: str) -> Iterator[ChatCompletionsEngine]:
    # No remote_model: the backend asks the server for its model.
    built = ChatCompletionsEngine(LLMSettings(backend="chat-completions", base_url=base_url, timeout_s=600))
    yield built
    built.close()


def run(engine: LLMEngine, request: ChatRequest) -> tuple[list[LLMPiece], str]:
    pieces: list[LLMPiece] = []
    finished = engine.stream(request, CancelToken(), pieces.append)
    text = "".join(p.text for p in pieces if isinstance(p, TextPiece))
    assert not MARKUP.search(text), text
    assert finished.reason != "cancelled"
    return pieces, text


def test_streams_text(engine: ChatCompletionsEngine) -> None:
    assert isinstance(engine, LLMEngine)
    pieces, text = run(engine, ChatRequest((SYSTEM, ChatMessage("user", "What is the capital of France?"))))
    assert "Paris" in text
    assert len(pieces) > 2 and all(isinstance(p, TextPiece) for p in pieces)  # streamed, not whole


@pytest.mark.parametrize("choice", ["auto", ForcedTool("get_weather")])
def test_streams_a_tool_call(engine: ChatCompletionsEngine, choice: object) -> None:
    question = ChatMessage("user", "What's the weather like in Paris right now?")
    request = ChatRequest((SYSTEM, question), tools=(WEATHER, HANG_UP), tool_choice=choice)  # type: ignore[arg-type]
    pieces, _ = run(engine, request)
    calls = [p.call for p in pieces if isinstance(p, ToolCallPiece)]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id
    arguments = json.loads(calls[0].arguments)
    jsonschema.validate(arguments, WEATHER.parameters)
    assert "paris" in arguments["city"].lower()


def test_the_responses_backend_fails_cleanly_where_the_server_lacks_the_api(base_url: str) -> None:
    engine = ResponsesEngine(LLMSettings(backend="responses", base_url=base_url, remote_model="any"))
    try:
        with pytest.raises(LLMServerError, match="HTTP 404") as caught:
            engine.stream(ChatRequest((ChatMessage("user", "Hi"),)), CancelToken(), lambda piece: None)
    finally:
        engine.close()
    # Clients see only the generic message and the error id (random hex, which may hold "404").
    error = caught.value
    assert error.error_id in error.public_message
    assert "404" not in error.public_message.replace(error.error_id, "")


# -- the responses backend, against LiteLLM's Responses API -----------------------------------


@pytest.fixture(scope="module")
def responses_engine(base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResponsesEngine]:
    binary = litellm_binary()
    if binary is None:
        pytest.skip(
            "LiteLLM's proxy is not installed: `make litellm` (make test does it) puts it in ~/.cache"
        )
    with litellm_proxy(binary, base_url, "qwen-local", tmp_path_factory.mktemp("litellm")) as url:
        settings = LLMSettings(
            backend="responses", base_url=url, api_key=MASTER_KEY, remote_model="qwen-local", timeout_s=600
        )
        built = ResponsesEngine(settings)
        yield built
        built.close()


def test_the_responses_backend_streams_text(responses_engine: ResponsesEngine) -> None:
    pieces, text = run(
        responses_engine, ChatRequest((SYSTEM, ChatMessage("user", "What is the capital of France?")))
    )
    assert "Paris" in text
    assert len(pieces) > 1 and all(isinstance(p, TextPiece) for p in pieces)


def test_the_responses_backend_streams_a_tool_call(responses_engine: ResponsesEngine) -> None:
    # "required": llama.cpp's server then writes the call as text, which the Responses API
    # passes on as output text and the backend parses. (A forced tool makes the server stream
    # tool-call chunks that LiteLLM 1.108.7 fails to bridge: `response.failed`.)
    question = ChatMessage("user", "What's the weather like in Paris right now?")
    request = ChatRequest((SYSTEM, question), tools=(WEATHER, HANG_UP), tool_choice="required")
    pieces, _ = run(responses_engine, request)
    calls = [p.call for p in pieces if isinstance(p, ToolCallPiece)]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id
    arguments = json.loads(calls[0].arguments)
    jsonschema.validate(arguments, WEATHER.parameters)
    assert "paris" in arguments["city"].lower()
