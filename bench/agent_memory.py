"""Voice-agent resident memory as the pool fills: `python -m bench.agent_memory`.

    --sessions 8       the most sessions held open at once (the pool's size)

A real `dragoman serve --services agent --num-pipelines N` on a free 127.0.0.1 port.
Sessions are opened one after another and kept open; each speaks one short English
recording at real time (100 ms appends, then silence) and waits for its spoken answer,
so every open session has run one response (its VAD, its turn, its LLM conversation
cached, its TTS). The server process's resident set (VmRSS in /proc/<pid>/status) is
read with the server idle, at 1, 2, 4, ... open sessions, and after all are closed.
The engines are shared, so it should stay nearly flat.

Markdown to stdout, progress to stderr (the client is bench/agent_client.py's).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import server as dragoman_server
from bench.agent_client import Client, Utterance, get, open_client, pool_idle, questions, speak
from bench.agent_latency import serve_args
from bench.agent_turn import ANSWER_TIMEOUT_S
from bench.report import header, log, table
from dragoman.audio.vad import SileroModel
from dragoman.config import default_cache_dir
from dragoman.weights import resolve
from harness.server import Server

MIB = 1024 * 1024


@dataclass(frozen=True)
class Reading:
    label: str
    sessions: int
    rss: int
    peak: int
    threads: int


def read_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in bytes, and the thread count, of a process."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
        elif key == "Threads":
            fields[key] = int(value)
    return fields


def reading(srv: Server, label: str, sessions: int) -> Reading:
    status = read_status(srv.process.pid)
    return Reading(label, sessions, status["VmRSS"], status["VmHWM"], status["Threads"])


async def one_response(srv: Server, question: Utterance) -> Client:
    """A new session that has spoken `question` and heard its answer; left open."""
    client = await open_client(srv.ws)
    stop = asyncio.Event()
    speaking = asyncio.create_task(speak(client, question.audio, time.time(), stop, ANSWER_TIMEOUT_S))
    try:
        await client.wait_for(lambda e: e["type"] == "response.done", ANSWER_TIMEOUT_S + 30)
    finally:
        stop.set()
        speaking.cancel()
        await asyncio.gather(speaking, return_exceptions=True)
    return client


async def run(count: int, workdir: Path) -> list[Reading]:
    vad = SileroModel.load(resolve("silero-vad", default_cache_dir()))
    short = questions(vad)[:count]  # the shortest recordings first
    marks = {n for n in (1, 2, 4, 8, 16, 32) if n < count} | {count}
    readings: list[Reading] = []
    with dragoman_server.running(serve_args(count), workdir / "dragoman.log") as srv:
        await asyncio.sleep(2.0)
        readings.append(reading(srv, "engines loaded, no session", 0))
        clients: list[Client] = []
        try:
            for index in range(count):
                question = short[index % len(short)]
                clients.append(await one_response(srv, question))
                log(f"session {index + 1} answered ({question.name})")
                if index + 1 in marks:
                    await asyncio.sleep(1.0)
                    busy = (await asyncio.to_thread(get, srv.http, "/v1/pool"))["busy"]
                    readings.append(reading(srv, f"{index + 1} open (pool busy {busy})", index + 1))
        finally:
            await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
        await pool_idle(srv.http)
        await asyncio.sleep(2.0)
        readings.append(reading(srv, "all closed", 0))
    return readings


def report(readings: list[Reading], count: int) -> None:
    print(f"## Resident memory as the pool fills (`--num-pipelines {count}`)\n")
    print(
        "Each session spoke one short English recording at real time, heard its answer and "
        "stayed open. VmRSS and its peak (VmHWM) of the server process, in MiB.\n"
    )
    first = next(r for r in readings if r.sessions == 1)
    rows: list[list[object]] = []
    for r in readings:
        per = (r.rss - first.rss) / MIB / (r.sessions - 1) if r.sessions > 1 else float("nan")
        rows.append(
            [
                r.label,
                f"{r.rss / MIB:.0f}",
                f"{(r.rss - first.rss) / MIB:+.0f}",
                "–" if per != per else f"{per:+.1f}",
                f"{r.peak / MIB:.0f}",
                r.threads,
            ]
        )
    print(
        table(
            ["server", "RSS MiB", "vs 1 session", "mean per added session", "peak MiB", "threads"],
            rows,
            whole=True,
        )
    )
    last = max((r for r in readings if r.sessions), key=lambda r: r.sessions)
    print(
        f"\n{last.sessions} sessions / 1 session: {last.rss / first.rss:.3f}× the resident memory "
        f"({(last.rss - first.rss) / MIB:+.0f} MiB).\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_memory", description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=8, help="the pool's size and the most sessions open")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    header("Voice-agent memory benchmark")
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-") as tmp:
        readings = asyncio.run(run(args.sessions, Path(tmp)))
    report(readings, args.sessions)
    load_avg = os.getloadavg()
    print(f"Finished in {time.perf_counter() - began:.0f} s; load average at the end {load_avg[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
