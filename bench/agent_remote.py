"""The voice agent with all three engines remote, against the all-local default:
`python -m bench.agent_remote`.

    --questions 6     spoken questions, each asked of both setups (default 6)
    --llm-model qwen2.5-0.5b-instruct-gguf   the GGUF both setups answer with
    --logs DIR        keep the four servers' logs there (default: a temporary folder)

Four real processes on loopback, all up for the whole run:

- **all-local**: the default `dragoman serve --services agent` (Whisper, Silero, Smart Turn,
  the LLM in llama.cpp in-process, the default voice), with `--llm-model` set;
- **all-remote**: a front-end `dragoman serve --services agent --asr-base-url ... --tts-base-url ...
  --llm-backend chat-completions --llm-base-url ...` that runs only the VAD and the turn model
  itself; its ASR and voice are an engine node's (`dragoman serve --services transcription agent`,
  `POST /v1/audio/transcriptions` and `POST /v1/audio/speech`), its LLM a real
  `python -m llama_cpp.server` serving the same GGUF (the node's own agent LLM is that server too,
  so nothing loads a second copy).

After one uncounted warm-up question on each, each question is a new session on each setup
in turn, the order alternating, with
`bench.agent_turn`'s measurement (`ask`, bench/agent_client.py's client): the recording streamed at real time in
100 ms appends, `server_vad`, times from the end of the speech as spoken to the answer's first
`response.output_audio.delta`, and the server's `agent stages` log for the stages between.
Progress to stderr, the tables to stdout; the first-audio p50 and p95 of each setup are recorded
(`bench/results/agent_remote.jsonl`). Everything runs on one machine, so the remote setup pays
HTTP on loopback and shares the cores like the local one, and gains no faster hardware.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import server as dragoman_server
from bench.agent_client import LONGEST_S, questions
from bench.agent_turn import Turn, ask, ms, stage_table
from bench.report import header, log, percentile, table
from bench.results import record
from dragoman.audio.vad import SileroModel
from dragoman.config import default_cache_dir
from dragoman.weights import resolve
from harness.llama_server import llama_server
from harness.server import Server

SETUPS = ("all-local", "all-remote")
SERVER_VAD: dict[str, Any] = {"type": "server_vad"}


def start_setups(stack: ExitStack, workdir: Path, llm_model: str) -> dict[str, Server]:
    """Both setups' servers, stopped when `stack` closes."""
    cache = str(default_cache_dir())
    gguf = resolve(llm_model, default_cache_dir())
    llm = stack.enter_context(llama_server(gguf, workdir / "llama.log"))
    remote_llm = ["--llm-backend", "chat-completions", "--llm-base-url", llm]
    node_args = ["serve", "--cache-dir", cache, "--services", "transcription", "agent", *remote_llm]
    node = stack.enter_context(dragoman_server.running(node_args, workdir / "node.log"))
    front_args = ["serve", "--cache-dir", cache, "--services", "agent", "--log-level", "info", *remote_llm]
    front_args += ["--asr-base-url", node.http + "/v1", "--tts-base-url", node.http + "/v1"]
    front = stack.enter_context(dragoman_server.running(front_args, workdir / "front.log"))
    local_args = ["serve", "--cache-dir", cache, "--services", "agent", "--log-level", "info"]
    local = stack.enter_context(
        dragoman_server.running([*local_args, "--llm-model", llm_model], workdir / "local.log")
    )
    return {"all-local": local, "all-remote": front}


async def run(servers: dict[str, Server], chosen: Sequence[Any]) -> list[Turn]:
    # One question each first, not counted: a fresh server's first answer pays one-off costs
    # (the LLM's weights paged in, its first prompt), 4-7 s here, which a deployment pays once.
    for setup in SETUPS:
        turn = await ask(servers[setup], setup, SERVER_VAD, chosen[0])
        log(f"{setup:10} warm-up: first audio {1000 * turn.at.get('first_audio', float('nan')):.0f} ms")
    turns = []
    for index, question in enumerate(chosen):
        order = SETUPS if index % 2 == 0 else SETUPS[::-1]  # neither setup always goes first
        for setup in order:
            turn = await ask(servers[setup], setup, SERVER_VAD, question)
            turns.append(turn)
            first = turn.at.get("first_audio", float("nan"))
            log(f"{setup:10} {question.name}: first audio {1000 * first:.0f} ms {turn.error}")
    return turns


def report(turns: list[Turn], llm_model: str) -> None:
    by_setup = {setup: [t for t in turns if t.mode == setup] for setup in SETUPS}
    count = len(by_setup[SETUPS[0]])
    print(
        f"{count} spoken questions (English recordings of asr.tsv up to {LONGEST_S:g} s, shortest "
        f"first), each a new session on each setup, alternating which goes first, after one "
        "uncounted warm-up question on each; `server_vad`; "
        f"LLM {llm_model} on both. Milliseconds after the end of the speech as spoken; the LLM and "
        "TTS moments are the front-end's `agent stages` log line.\n"
    )
    print(stage_table(by_setup))
    load = os.getloadavg()
    conditions = (
        f"{count} recordings after a warm-up, server_vad, LLM {llm_model} on both, node, llama_cpp.server and both "
        f"front-ends on one shared machine (load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f})"
    )
    summary = []
    for setup in SETUPS:
        firsts = ms([t.at.get("first_audio", float("nan")) for t in by_setup[setup]])
        failed = sum(1 for t in by_setup[setup] if "first_audio" not in t.at)
        p50, p95 = percentile(firsts, 50), percentile(firsts, 95)
        summary.append([setup, p50, p95, failed])
        for name, value in (("p50", p50), ("p95", p95)):
            record(
                "agent_remote",
                "voice agent, all engines remote against all local",
                f"end of speech → first answer audio, {name} ({setup})",
                value,
                "ms",
                conditions=f"{conditions}; {failed} unanswered",
            )
    print()
    print(table(["setup", "first audio p50 ms", "p95 ms", "no answer"], summary, whole=True))
    print("\n<details><summary>per question</summary>\n")
    detail = [
        [
            t.name,
            t.mode,
            f"{1000 * t.at['first_audio']:.0f}" if "first_audio" in t.at else "–",
            (t.error or f"{t.transcript[:50]} → {t.answer[:50]}").replace("|", "/"),
        ]
        for t in turns
    ]
    print(table(["recording", "setup", "first audio ms", "heard → said"], detail, whole=True))
    print("\n</details>\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_remote", description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--llm-model", default="qwen2.5-0.5b-instruct-gguf")
    parser.add_argument("--logs", type=Path, help="keep the servers' logs in this folder")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    header("Voice agent: all engines remote against all local")
    chosen = questions(SileroModel.load(resolve("silero-vad", default_cache_dir())))[: args.questions]
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-") as tmp, ExitStack() as stack:
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
        servers = start_setups(stack, args.logs or Path(tmp), args.llm_model)
        log(f"servers up in {time.perf_counter() - began:.0f} s; {len(chosen)} questions")
        turns = asyncio.run(run(servers, chosen))
    report(turns, args.llm_model)
    load = os.getloadavg()
    print(f"Finished in {time.perf_counter() - began:.0f} s; load average at the end {load[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
