"""Does the voice agent call a tool when, and only when, it should? `python -m bench.agent_tools`.

    --models qwen2.5-0.5b-instruct-gguf,qwen2.5-1.5b-instruct-gguf   LLMs compared (one server each)
    --instructions default,generic,named   the session's instructions (below)
    --json calls.json                      every answer

A voice framework (LiveKit, pipecat, the Agents SDK) offers the model its tools with
the application's own instructions, and the model decides, turn by turn, whether to
call one or to answer in words. A small model gets that decision wrong both ways: it
describes a call instead of making it, or it calls a tool for a question that needs
none. This benchmark measures both, as a client meets them: a real `dragoman serve
--services agent --llm-model M` on a free loopback port, one new session per request
through the openai SDK's Realtime client (every event validated against its types),
`session.update` with two function tools (`get_weather`, `set_light`) and the
instructions, then the request typed as a `conversation.item.create` and a
`response.create`. The server adds its tool preamble (`agent.tool_preamble`) to the
instructions, as it does for every client.

- **requests for a tool**: 16 that one of the tools serves; right when the response
  calls that tool, once, with the expected argument;
- **questions for no tool**: the first 24 everyday questions of
  `bench/data/agent_questions.tsv` and 6 greetings and remarks; right when the response
  calls nothing (and, for the questions, says their fact).

Instructions: `default` sets none (the server's own), `generic` is the kind of one-line
persona a framework's example starts with, and `named` says what each tool is for. There
is no goal in an issue for these rates: they are measured so that a change to the
preamble or the model shows what it moves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import server as dragoman_server
from bench.agent_accuracy import MODELS, Question, answer_text, configured, questions, wait_pool
from bench.report import header, log, table
from bench.results import record
from harness.realtime_helpers import read_until
from harness.server import Server

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "type": "function",
        "name": "set_light",
        "description": "Turn the living room light on or off.",
        "parameters": {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
    },
]
INSTRUCTIONS: dict[str, str | None] = {
    "default": None,
    "generic": "You are a helpful voice AI assistant.",
    "named": (
        "You are a helpful voice assistant. Use get_weather when the user asks about the weather "
        "somewhere and set_light when they want the living room light switched; answer everything "
        "else yourself, briefly."
    ),
}
#: (request, the tool that serves it, its argument, the expected value).
FOR_A_TOOL: list[tuple[str, str, str, object]] = [
    ("What's the weather like in Berlin?", "get_weather", "city", "berlin"),
    ("Do I need an umbrella in Madrid today?", "get_weather", "city", "madrid"),
    ("Tell me the temperature in Tokyo.", "get_weather", "city", "tokyo"),
    ("Is it sunny in Sydney at the moment?", "get_weather", "city", "sydney"),
    ("How cold is it in Oslo?", "get_weather", "city", "oslo"),
    ("Check the weather in Vienna for me.", "get_weather", "city", "vienna"),
    ("Is it snowing in Moscow?", "get_weather", "city", "moscow"),
    ("What's the forecast for Chicago right now?", "get_weather", "city", "chicago"),
    ("What is the weather in Paris right now?", "get_weather", "city", "paris"),
    ("Is it raining in London?", "get_weather", "city", "london"),
    ("How warm is it in Rome today?", "get_weather", "city", "rome"),
    ("Switch on the light.", "set_light", "on", True),
    ("Could you turn the lights on?", "set_light", "on", True),
    ("Lights off, please.", "set_light", "on", False),
    ("Please switch the living room light off.", "set_light", "on", False),
    ("Turn off the light, please.", "set_light", "on", False),
]
REMARKS = [
    "Hello, how are you?",
    "Thank you, that's all.",
    "Tell me a joke.",
    "What's your name?",
    "I'm from the cutter lying off the coast.",
    "Good morning!",
]
FACT_QUESTIONS = 24


@dataclass(frozen=True)
class Reply:
    instructions: str
    request: str
    #: The tool that should have been called ("" for none).
    wanted: str
    calls: list[tuple[str, dict[str, Any]]]
    text: str
    right: bool


def judge_tool(request: tuple[str, str, str, object], calls: list[tuple[str, dict[str, Any]]]) -> bool:
    _, tool, argument, value = request
    if len(calls) != 1 or calls[0][0] != tool:
        return False
    got = calls[0][1].get(argument)
    return (got.strip().lower() if isinstance(got, str) else got) == value


async def ask(server: Server, text: str, instructions: str | None) -> tuple[list[Any], str]:
    """One request in a new session: the calls the response made and the text it said."""
    await wait_pool(server)
    session: Any = {"type": "realtime", "output_modalities": ["text"], "tools": TOOLS}
    if instructions is not None:
        session["instructions"] = instructions
    async with configured(server, session) as (conn, events):
        item: Any = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        await conn.conversation.item.create(item=item)
        await conn.response.create()
        await read_until(conn, events, lambda e: e["type"] == "response.done", 120)
    done = events.of("response.done")[0]
    calls = [
        (out["name"], json.loads(out["arguments"] or "{}"))
        for out in done["response"]["output"]
        if out.get("type") == "function_call"
    ]
    return calls, answer_text(done)


async def run_model(
    model: str, kinds: Sequence[str], facts: Sequence[Question], workdir: Path
) -> list[Reply]:
    replies: list[Reply] = []
    args = ["serve", "--services", "agent", "--llm-model", model]
    with dragoman_server.running(args, workdir / f"serve-{model}.log") as server:
        for kind in kinds:
            instructions = INSTRUCTIONS[kind]
            for request in FOR_A_TOOL:
                calls, text = await ask(server, request[0], instructions)
                replies.append(Reply(kind, request[0], request[1], calls, text, judge_tool(request, calls)))
            for question in facts:
                calls, text = await ask(server, question.text, instructions)
                replies.append(
                    Reply(kind, question.text, "", calls, text, not calls and question.right(text))
                )
            for remark in REMARKS:
                calls, text = await ask(server, remark, instructions)
                replies.append(Reply(kind, remark, "", calls, text, not calls))
            log(
                f"{model}, {kind} instructions: {sum(r.right for r in replies if r.instructions == kind)} right"
            )
    return replies


def report(results: dict[str, list[Reply]]) -> None:
    rows = []
    for model, replies in results.items():
        for kind in dict.fromkeys(r.instructions for r in replies):
            mine = [r for r in replies if r.instructions == kind]
            wanted = [r for r in mine if r.wanted]
            plain = [r for r in mine if not r.wanted]
            called = sum(r.right for r in wanted)
            spurious = sum(bool(r.calls) for r in plain)
            right = sum(r.right for r in plain)
            goal = f"voice agent tool calls ({model})"
            conditions = f"{len(wanted)} requests for a tool, {len(plain)} questions and remarks for none"
            record(
                "agent_tools",
                goal,
                f"requests for a tool that called it right ({kind} instructions)",
                100 * called / len(wanted),
                "%",
                conditions=conditions,
            )
            record(
                "agent_tools",
                goal,
                f"questions for no tool that called one ({kind} instructions)",
                100 * spurious / len(plain),
                "%",
                conditions=conditions,
            )
            rows.append(
                (model, kind, f"{called}/{len(wanted)}", f"{spurious}/{len(plain)}", f"{right}/{len(plain)}")
            )
    print(
        table(
            [
                "LLM",
                "instructions",
                "tool requests called right",
                "no-tool questions with a call",
                "no-tool questions answered right",
            ],
            rows,
            whole=True,
        )
    )
    print("\n## Wrong replies\n")
    for model, replies in results.items():
        for r in replies:
            if not r.right:
                said = f'"{r.text}"' if r.text else "(nothing said)"
                print(f'- {model}, {r.instructions}: "{r.request}" → calls {r.calls or "none"}, {said}')


async def main_async(args: argparse.Namespace) -> dict[str, list[Reply]]:
    kinds = args.instructions.split(",")
    unknown = [k for k in kinds if k not in INSTRUCTIONS]
    if unknown:
        raise SystemExit(f"unknown instructions {unknown}; known: {', '.join(INSTRUCTIONS)}")
    facts = questions(FACT_QUESTIONS)
    results: dict[str, list[Reply]] = {}
    with tempfile.TemporaryDirectory(prefix="agent-tools-") as tmp:
        for model in args.models.split(","):
            results[model] = await run_model(model, kinds, facts, Path(tmp))
    header("Voice agent tool calls")
    print(f"Tools get_weather and set_light; instructions: {', '.join(kinds)}; typed requests.\n")
    report(results)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_tools", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--instructions", default=",".join(INSTRUCTIONS))
    parser.add_argument("--json", help="write every reply to this JSON file")
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args))
    if args.json:
        dump = {m: [r.__dict__ for r in replies] for m, replies in results.items()}
        Path(args.json).write_text(json.dumps(dump, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
