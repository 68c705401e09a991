"""The soak's run (`python -m bench.soak`): its plan, material, clients and server samples.

`soak` starts every client of the `Plan` against one running server, staggered, samples the
server's RSS, threads and open files meanwhile, and returns the `Recorder` and the samples;
`get_json`, `metric_lines` and `server_log_problems` read the server's state after the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import soak_abusers as abusers
from bench import soak_clients as clients
from bench import soak_interpreter
from bench.audio import Audio, eval_rows, load, wer_clips
from bench.report import log
from bench.soak_recorder import Recorder, Schedule
from dragoman.tools import eval_set
from harness.server import Server

#: Utterances longer than this are cut into parts (the server's item cap is 30 s).
UTTERANCE_CAP_S = 20.0
#: Single utterances (no inner pause long enough for server VAD to end a turn), as in the agent e2e tests.
AGENT_SPEECH = ("asr/en/en_ls-devclean_1272-128104-0000.wav", "asr/en/en_ls-testclean_6930-75918-0000.flac")
FLORES = eval_set.eval_path(eval_set.FLORES)


@dataclass(frozen=True)
class Plan:
    minutes: float
    abuse: bool
    transcription: int
    mt: int
    agent: int
    interpreter: int
    flooders: int
    oversize: int
    idle: int
    reconnect_every: int
    flood_speed: float
    idle_timeout: float
    max_message_bytes: int
    sample_seconds: float
    log_level: str = "info"

    def serve_args(self) -> list[str]:
        mt_sessions = max(4, self.mt + self.oversize + self.idle + 1)
        return [
            "serve",
            "--services",
            "transcription",
            "mt",
            "agent",
            "interpreter",
            "--num-pipelines",
            str(max(2, self.agent + 1)),
            "--max-transcription-sessions",
            "16",
            "--max-sessions",
            str(mt_sessions),
            "--idle-timeout",
            f"{self.idle_timeout:g}",
            "--max-message-bytes",
            str(self.max_message_bytes),
            "--log-level",
            self.log_level,
        ]


@dataclass(frozen=True)
class Sample:
    at: float
    rss_mb: float
    threads: int
    fds: int


def sample(pid: int) -> Sample:
    fields: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return Sample(time.monotonic(), int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"]), fds)


async def sample_memory(pid: int, every: float, until: Callable[[], bool], into: list[Sample]) -> None:
    while not until():
        into.append(sample(pid))
        await asyncio.sleep(every)


def get_json(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body: dict[str, Any] = json.loads(response.read())
            return body
    except (OSError, ValueError) as exc:
        return {"unavailable": str(exc)}


def metric_lines(url: str, names: Sequence[str]) -> list[str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith(tuple(names))]


def server_log_problems(path: Path) -> tuple[Counter[str], int]:
    """(error/critical/warning log events by message, Traceback lines) in the server's log."""
    events: Counter[str] = Counter()
    tracebacks = 0
    for line in path.read_text(errors="replace").splitlines():
        tracebacks += "Traceback" in line
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("level") in ("warning", "error", "critical"):
            events[f"{entry['level']}: {str(entry.get('event'))[:120]}"] += 1
    return events, tracebacks


@dataclass
class Material:
    utterances: list[Audio]
    speech: list[Audio]
    sentences: list[str]
    #: The utterances at the interpreter's 24 kHz.
    talk: list[Audio]


def material() -> Material:
    utterances = [part for clip in wer_clips(UTTERANCE_CAP_S) for part in clip.parts]
    rows = {row.file: row for row in eval_rows("en")}
    speech = [load(rows[file], clients.AGENT_RATE) for file in AGENT_SPEECH]
    talk = [part for clip in wer_clips(UTTERANCE_CAP_S, rate=soak_interpreter.RATE) for part in clip.parts]
    return Material(utterances, speech, clients.flores_sentences(FLORES), talk)


async def soak(plan: Plan, server: Server, stuff: Material) -> tuple[Recorder, list[Sample]]:
    realtime = server.ws + "/v1/realtime"
    transcription = realtime + "?intent=transcription"
    mt = server.ws + "/v1/mt"
    schedule = Schedule(time.monotonic() + 1.0, plan.minutes * 60, plan.abuse)
    rec = Recorder(schedule)
    samples: list[Sample] = []
    finished = False
    sampler = asyncio.create_task(
        sample_memory(server.process.pid, plan.sample_seconds, lambda: finished, samples)
    )
    work: list[Coroutine[Any, Any, None]] = []
    for i in range(plan.transcription):
        work.append(clients.transcriber(transcription, rec, i, stuff.utterances, plan.reconnect_every))
    for i in range(plan.mt):
        work.append(clients.translator(mt, rec, i, stuff.sentences, plan.reconnect_every))
    for i in range(plan.agent):
        work.append(clients.agent(realtime, rec, i, stuff.speech, plan.reconnect_every + 2))
    translations = f"{server.ws}/v1/realtime/translations?model={soak_interpreter.MODEL}"
    for i in range(plan.interpreter):
        work.append(soak_interpreter.interpreter(translations, rec, i, stuff.talk, plan.reconnect_every))
    if plan.abuse:
        for i in range(plan.flooders):
            work.append(abusers.flooder(transcription, rec, i, stuff.utterances, plan.flood_speed))
        for i in range(plan.oversize):
            work.append(abusers.oversizer(transcription, mt, rec, i, plan.max_message_bytes))
        for i in range(plan.idle):
            work.append(abusers.idler(transcription, mt, rec, i))

    async def staggered(k: int, job: Coroutine[Any, Any, None]) -> None:
        await asyncio.sleep(0.7 * k)  # independent clients do not start in the same instant
        await job

    async def progress() -> None:
        while not schedule.over():
            await asyncio.sleep(60)
            now = time.monotonic()
            done = Counter(s.kind for s in rec.latencies)
            rss = samples[-1].rss_mb if samples else float("nan")
            log(
                f"{(now - schedule.begin) / 60:.1f} min ({schedule.phase(now)}): RSS {rss:.0f} MB, "
                f"answers {dict(done)}, load {os.getloadavg()[0]:.2f}"
            )

    reporter = asyncio.create_task(progress())
    try:
        await asyncio.gather(*(staggered(k, job) for k, job in enumerate(work)))
    finally:
        reporter.cancel()
        await asyncio.sleep(5)  # the server closes what the clients left
        samples.append(sample(server.process.pid))
        finished = True
        await sampler
    return rec, samples
