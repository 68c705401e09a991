"""The voice agent with its LLM on another server: the `chat-completions` backend, and the proxy.

A real `python -m llama_cpp.server` serves the packaged GGUF on a free loopback port, as
vLLM or a llama.cpp server would for a deployment that puts its LLM elsewhere; a
`dragoman serve --services agent --llm-backend chat-completions --enable-llm-proxy` uses
it, and exposes it at `POST /v1/chat/completions`.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from dragoman.weights import resolve
from harness.llama_server import llama_server
from harness.realtime_helpers import read_until
from harness.server import Server, start, stop
from tests.e2e.agent_helpers import agent, response_done

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    logs = tmp_path_factory.mktemp("remote-llm")
    model = resolve("qwen2.5-0.5b-instruct-gguf", cache_dir)
    with llama_server(model, logs / "llama.log") as base_url:
        args = ["serve", "--cache-dir", str(cache_dir), "--services", "agent"]
        args += ["--llm-backend", "chat-completions", "--llm-base-url", base_url, "--enable-llm-proxy"]
        running = start(args, logs / "dragoman.log", timeout=600.0)
        yield running
        stop(running)


def test_health_names_the_remote_backend(remote: Server) -> None:
    with urllib.request.urlopen(remote.http + "/health", timeout=10) as answer:
        health = json.loads(answer.read())
    (llm,) = [engine for engine in health["engines"] if engine["role"] == "llm"]
    assert llm["backend"] == "chat-completions"


async def test_a_spoken_answer_comes_from_the_remote_llm(remote: Server) -> None:
    async with agent(remote, instructions="Answer in one short sentence.") as (conn, log):
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}
        await conn.conversation.item.create(item=item)
        await conn.response.create()
        await read_until(conn, log, response_done, limit=180)
    (done,) = log.of("response.done")
    assert done["response"]["status"] == "completed", done
    assert log.of("response.output_audio.delta"), "the remote text was spoken"
    (final,) = log.of("response.output_audio_transcript.done")
    assert final["transcript"].strip()


async def test_a_tool_call_through_the_remote_llm(remote: Server) -> None:
    from tests.e2e.agent_helpers import WEATHER, ask_in_text

    async with agent(remote, tools=[WEATHER], tool_choice={"type": "function", "name": "get_weather"}) as (
        conn,
        log,
    ):
        await ask_in_text(conn, log, "What is the weather in Rome?")
    (call,) = log.of("response.function_call_arguments.done")
    assert call["name"] == "get_weather" and "rome" in json.loads(call["arguments"])["city"].lower()


def test_the_proxy_passes_chat_completions_through(remote: Server) -> None:
    api = OpenAI(base_url=remote.http + "/v1", api_key="unused", max_retries=0)
    model = "qwen"  # llama_cpp.server serves its one model whatever the name
    answer = api.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Reply with the word yes."}], max_tokens=8
    )
    assert answer.choices[0].message.content
    pieces: list[Any] = list(
        api.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Count: one, two"}], max_tokens=8, stream=True
        )
    )
    assert any(chunk.choices and chunk.choices[0].delta.content for chunk in pieces), "streamed through"
    with pytest.raises(Exception) as refused:
        api.responses.create(model=model, input="hi")
    assert getattr(refused.value, "status_code", None) == 404, "only the backend's own API is proxied"


def test_without_the_flag_there_is_no_proxy(server: Server) -> None:
    request = urllib.request.Request(server.http + "/v1/chat/completions", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(request, timeout=10)
    assert missing.value.code in (404, 405)


async def test_a_long_answer_from_the_remote_llm_ends_whole_at_the_soft_length(remote: Server) -> None:
    """The server's default soft length (48 tokens) holds for a remote LLM too: asked to ramble,
    it answers a few whole sentences, and the response completes."""
    async with agent(remote, instructions="Answer in great detail, in at least fifteen sentences.") as (
        conn,
        log,
    ):
        text = "Tell me everything about the history of Paris."
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        await conn.conversation.item.create(item=item)
        await conn.response.create()
        await read_until(conn, log, response_done, limit=300)
    (done,) = log.of("response.done")
    assert done["response"]["status"] == "completed", done
    (final,) = log.of("response.output_audio_transcript.done")
    spoken = final["transcript"].strip()
    assert spoken[-1:] in ".!?", spoken
    # 48 tokens, and at most the grace of 32 more for the sentence to end: well under 80 words.
    assert 5 < len(spoken.split()) < 80, spoken
