"""Embedded LLM latency with the real model: `python -m bench.llm_latency`.

    --model qwen2.5-0.5b-instruct-gguf   a packaged model name or a GGUF file
    --threads 2                          llama.cpp threads (default: half the cores)
    --runs 3                             repetitions; medians are reported

1. Raw llama.cpp rates: prefill tok/s of a ~150-token prompt in one pass, and
   decode tok/s of greedy tokens one at a time.
2. A voice-agent turn through `LlamaCppEngine.stream`: a ~150-token system prompt
   and a question, first piece latency and whole turn, for a new conversation
   (nothing cached but the template's first tokens) and for the second turn of a
   conversation after another conversation ran in between (its KV snapshot is put
   back, so only the new user turn is prefilled). The same with two tools offered:
   the first turn up to the tool call, the second the answer to the tool's result.
   Two levers apart: a new conversation whose instructions are the server's default,
   kept from start-up (`warm_up(instructions)`), and a second turn whose snapshot was
   dropped (what the KV cache between turns saves).

Progress goes to stderr, markdown tables to stdout. Absolute times on a shared
2-core machine are noisy: compare figures measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from bench.report import log, table
from dragoman.config import LLMSettings, default_cache_dir
from dragoman.cpu import cpu_info
from dragoman.engines.llm.base import (
    ChatMessage,
    ChatRequest,
    LLMPiece,
    TextPiece,
    ToolCall,
    ToolCallPiece,
    ToolSpec,
)
from dragoman.engines.llm.llama_cpp import LlamaCppEngine, create, default_threads
from dragoman.engines.llm.llama_runtime import LlamaRuntime
from dragoman.engines.workers import CancelToken
from dragoman.logs import configure as configure_logs
from dragoman.weights import resolve

#: About 150 tokens with the question: the persona a voice agent would run with.
SYSTEM_PROMPT = (
    "You are Dana, the voice assistant of a small travel agency. Your answers are spoken aloud "
    "by a speech synthesiser, so keep them short: one to three plain sentences, no lists, no "
    "markdown, no emoji, and spell out numbers the way a person would say them. Be friendly and "
    "direct. If a question is about bookings, flights, hotels or the weather at a destination, "
    "answer from what you know or from the tools you are given, and say so when you are not sure. "
    "Never invent prices or confirmation numbers. If the caller wants to speak to a person, say "
    "that you will pass the call on. Before you call a tool, say in a few words what you are about "
    "to do."
)
QUESTION = "Hi! I'm flying to Lisbon next week. What should I pack for the trip?"
FOLLOW_UP = "And is it usually rainy there in spring?"
#: The 0.5B called the tool for this 4 times in 4 (for "What's the weather like in Lisbon right
#: now?" it answered in text 4 times in 4).
TOOL_QUESTION = "Please check the current weather in Lisbon for me."
TOOLS = (
    ToolSpec(
        "get_weather",
        "Get the current weather in a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSpec("transfer_call", "Pass the call on to a person", {"type": "object", "properties": {}}),
)
REPLY_TOKENS = 32


# -- 1. raw rates -------------------------------------------------------------------------------


def raw_rates(model: Path, threads: int, runs: int) -> tuple[int, float, float]:
    """(prompt tokens, prefill tok/s, decode tok/s), medians over `runs`."""
    runtime = LlamaRuntime(model, context_tokens=2048, threads=threads)
    try:
        prompt = runtime.tokenize(
            f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{QUESTION}"
        )
        runtime.decode(prompt, 0)  # warm: the first pass pays for page faults of the mapped weights
        prefill, decode = [], []
        for _ in range(runs):
            runtime.truncate(0)
            began = time.perf_counter()
            runtime.decode(prompt, 0)
            prefill.append(len(prompt) / (time.perf_counter() - began))
            sampler = runtime.sampler(temperature=0.0, seed=0)
            began = time.perf_counter()
            for i in range(REPLY_TOKENS):
                runtime.decode([sampler.sample()], len(prompt) + i)
            decode.append(REPLY_TOKENS / (time.perf_counter() - began))
            sampler.close()
        return len(prompt), statistics.median(prefill), statistics.median(decode)
    finally:
        runtime.close()


# -- 2. engine turns ----------------------------------------------------------------------------


@dataclass
class Turn:
    first_piece_s: float
    total_s: float
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    calls: tuple[ToolCall, ...]


def timed(engine: LlamaCppEngine, request: ChatRequest) -> tuple[Turn, str]:
    began = time.perf_counter()
    first: list[float] = []
    pieces: list[LLMPiece] = []

    def emit(piece: LLMPiece) -> None:
        if not first:
            first.append(time.perf_counter() - began)
        pieces.append(piece)

    finished = engine.stream(request, CancelToken(), emit)
    total = time.perf_counter() - began
    text = "".join(p.text for p in pieces if isinstance(p, TextPiece))
    calls = tuple(p.call for p in pieces if isinstance(p, ToolCallPiece))
    turn = Turn(
        first[0] if first else total,
        total,
        finished.input_tokens,
        finished.cached_tokens,
        finished.output_tokens,
        calls,
    )
    return turn, text


def conversation_turns(
    engine: LlamaCppEngine, tools: bool, *, default_instructions: bool = False, keep_snapshot: bool = True
) -> tuple[Turn, Turn]:
    """(first turn of a new conversation, its second turn after another conversation's).

    `default_instructions`: the system prompt is the one the engine was warmed with (cached
    from start-up); `keep_snapshot` False drops the conversation's KV snapshot between turns.
    """
    # A unique first line keeps the new conversation from sharing the previous run's system prompt.
    unique = "" if default_instructions else f"Session {uuid.uuid4().hex[:8]}. "
    system = ChatMessage("system", unique + SYSTEM_PROMPT)
    key = uuid.uuid4().hex
    offered = TOOLS if tools else ()
    messages = [system, ChatMessage("user", TOOL_QUESTION if tools else QUESTION)]
    request = ChatRequest(tuple(messages), tools=offered, max_tokens=REPLY_TOKENS, conversation=key)
    first, text = timed(engine, request)
    # Another session speaks in between: the sequence now holds its tokens.
    other = (ChatMessage("system", f"Other {uuid.uuid4().hex[:8]}."), ChatMessage("user", "Hello?"))
    timed(engine, ChatRequest(other, max_tokens=4, conversation=uuid.uuid4().hex))
    if first.calls:
        result = '{"temperature_celsius": 19, "sky": "sunny"}'
        messages += [
            ChatMessage("assistant", text, tool_calls=first.calls),
            ChatMessage("tool", result, tool_call_id=first.calls[0].call_id),
        ]
    else:
        messages += [ChatMessage("assistant", text), ChatMessage("user", FOLLOW_UP)]
    if not keep_snapshot:
        engine.forget(key)
    second, _ = timed(
        engine, ChatRequest(tuple(messages), tools=offered, max_tokens=REPLY_TOKENS, conversation=key)
    )
    engine.forget(key)
    return first, second


def summary(label: str, turns: Sequence[Turn]) -> list[object]:
    """A table row of medians, and how many of the turns called a tool."""
    median = statistics.median
    input_tokens = round(median(t.input_tokens for t in turns))
    cached = round(median(t.cached_tokens for t in turns))
    return [
        label,
        input_tokens,
        cached,
        input_tokens - cached,
        median(t.first_piece_s for t in turns),
        median(t.total_s for t in turns),
        round(median(t.output_tokens for t in turns)),
        f"{sum(bool(t.calls) for t in turns)}/{len(turns)}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.llm_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-0.5b-instruct-gguf", help="packaged model name or a GGUF")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    configure_logs("warning", "console")
    cache_dir = default_cache_dir()
    model = resolve(args.model, cache_dir, role="llm")
    load = os.getloadavg()
    system_info = llama_cpp.llama_print_system_info().decode().strip()
    print("# Embedded LLM latency\n")
    print(
        f"Model {args.model} on llama-cpp-python {llama_cpp.__version__}, {args.threads} threads; "
        f"{cpu_info().describe()}; llama.cpp build: `{system_info}`; load average at start "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}. Medians of {args.runs} runs.\n"
    )
    log("raw rates")
    n_prompt, prefill, decode = raw_rates(model, args.threads, args.runs)
    print("## 1. llama.cpp rates\n")
    print(table(["prompt tokens", "prefill tok/s", "decode tok/s"], [[n_prompt, prefill, decode]]))
    print()

    engine = create(LLMSettings(model=args.model, threads=args.threads), cache_dir)
    try:
        engine.warm_up(SYSTEM_PROMPT)
        rows = []
        for tools in (False, True):
            log(f"engine turns, tools={tools}")
            firsts, seconds = zip(*(conversation_turns(engine, tools) for _ in range(args.runs)), strict=True)
            if tools:
                rows.append(summary("tools: question -> call, new conversation", firsts))
                rows.append(summary("tools: tool result -> answer, KV snapshot restored", seconds))
            else:
                rows.append(summary("text: new conversation", firsts))
                rows.append(summary("text: 2nd turn, KV snapshot restored", seconds))
                log("engine turns: the default instructions cached; no snapshot kept")
                turns = [
                    conversation_turns(engine, False, default_instructions=True, keep_snapshot=False)
                    for _ in range(args.runs)
                ]
                rows.append(
                    summary("text: new conversation, default instructions cached", [t[0] for t in turns])
                )
                rows.append(summary("text: 2nd turn, no KV snapshot", [t[1] for t in turns]))
    finally:
        engine.close()
    print("## 2. Voice-agent turns (`LlamaCppEngine.stream`)\n")
    print(
        f"First piece: the first text piece, or the tool call. Replies are capped at {REPLY_TOKENS} tokens; "
        "the tool turns offer get_weather and transfer_call.\n"
    )
    headers = [
        "turn",
        "input tok",
        "cached tok",
        "prefilled tok",
        "first piece s",
        "turn s",
        "output tok",
        "calls",
    ]
    print(table(headers, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
