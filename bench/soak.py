"""Soak and abuse run against one real server: `python -m bench.soak [--minutes 10] [--abuse]`.

One `dragoman serve --services transcription mt agent interpreter` on a free loopback port,
and for `--minutes` concurrent sessions of real speech that reconnect (a new session every
`--reconnect-every` utterances, sentences or turns): transcription (recordings of
../shared/eval/asr.tsv at real-time pace), MT (FLORES sentences fed word by word), the
voice agent (text turns, and every third turn spoken) and the interpreter (the same
recordings spoken on and on into a translation session). The clients are in
`bench/soak_clients.py` and `bench/soak_interpreter.py`.

Reported: the server's RSS slope (least squares over samples of /proc/<pid>/status VmRSS),
errors by code (server_error must be 0), lost items (every committed transcription item must
reach `.completed`, every MT final its final translation, every agent response its
`response.done`, every recording the interpreter heard some translation), and p95 latency in the first against the last fifth of the run.

`--abuse` splits the run into ten windows, calm and abuse in turn (each fifth is one of
each): in the abuse windows flooders append `--flood-speed` × faster than real time,
oversize clients send a frame past `--max-message-bytes`, idle clients connect and say
nothing (`--idle-timeout` on the server). The well-behaved sessions' latency is then given
for the calm and the abuse windows side by side, and the abusers' protocol errors counted.

Progress goes to stderr, markdown tables to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import server as dragoman_server
from bench import soak_clients as clients
from bench import soak_interpreter
from bench.audio import Audio, eval_rows, load, wer_clips
from bench.report import log, table
from bench.soak_clients import Recorder, Schedule
from dragoman.cpu import cpu_info
from dragoman.tools import eval_set
from harness.server import Server

#: Utterances longer than this are cut into parts (the server's item cap is 30 s).
UTTERANCE_CAP_S = 20.0
#: Single utterances (no inner pause long enough for server VAD to end a turn), as in the agent e2e tests.
AGENT_SPEECH = ("asr/en/en_ls-devclean_1272-128104-0000.wav", "asr/en/en_ls-testclean_6930-75918-0000.flac")
FLORES = eval_set.eval_path(eval_set.FLORES)
KINDS = (
    ("transcription", "transcription: commit → completed"),
    ("mt partial", "MT partial: update → its translation"),
    ("mt final", "MT final: is_final update → its translation"),
    ("agent text", "agent text turn: response.create → response.done"),
    ("agent spoken", "agent spoken turn: end of speech sent → response.done"),
    ("interpreter first text", "interpreter: a recording's speech start → its first translated text"),
    ("interpreter end lag", "interpreter: a recording's last append → its last translated text"),
)
WELL_BEHAVED = ("transcription", "mt", "agent", "interpreter")
#: Each abuser, and what it must be told (MT protocol v1 has four codes: bad_protocol for both there).
EXPECTED = {
    "flooder": "input_audio_buffer_backlog",
    "oversize (transcription)": "message_too_big",
    "oversize (mt)": "bad_protocol",
    "idle (transcription)": "idle_timeout",
    "idle (mt)": "bad_protocol",
}
ABUSERS = tuple(EXPECTED)


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


def slope(samples: Sequence[Sample]) -> float:
    """Least-squares MB/min."""
    if len(samples) < 3:
        return float("nan")
    minutes = np.array([s.at for s in samples]) / 60
    return float(np.polyfit(minutes - minutes[0], [s.rss_mb for s in samples], 1)[0])


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


# -- the run -------------------------------------------------------------------------------------


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
            work.append(clients.flooder(transcription, rec, i, stuff.utterances, plan.flood_speed))
        for i in range(plan.oversize):
            work.append(clients.oversizer(transcription, mt, rec, i, plan.max_message_bytes))
        for i in range(plan.idle):
            work.append(clients.idler(transcription, mt, rec, i))

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


# -- the report ----------------------------------------------------------------------------------


def p(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def latency_cell(values: Sequence[float]) -> list[object]:
    return [len(values), f"{p(values, 50):.2f}", f"{p(values, 95):.2f}"]


def report_latency(rec: Recorder) -> None:
    schedule = rec.schedule
    print("## Latency: first vs last fifth of the run\n")
    fifth = schedule.seconds / 5
    print(
        f"Each sample is placed by when its request went; a fifth is {fifth / 60:.1f} min"
        + (" (one calm and one abuse window each)" if schedule.abuse else "")
        + ". Seconds.\n"
    )
    rows: list[list[object]] = []
    for kind, label in KINDS:
        first = [s.seconds for s in rec.latencies if s.kind == kind and schedule.fifth(s.at) == 0]
        last = [s.seconds for s in rec.latencies if s.kind == kind and schedule.fifth(s.at) == 4]
        ratio = p(last, 95) / p(first, 95) if first and last else float("nan")
        rows.append([label, *latency_cell(first), *latency_cell(last), f"{ratio:.2f}"])
    headers = ["latency", "n first", "p50", "p95", "n last", "p50", "p95", "p95 last / first"]
    print(table(headers, rows))
    print()
    if schedule.abuse:
        print("## Latency of the well-behaved sessions: without and with abuse (same run)\n")
        print(
            f"Ten windows of {schedule.window:.0f} s, calm and abuse in turn; a sample belongs to the "
            "window its request went in. Seconds.\n"
        )
        rows = []
        for kind, label in KINDS:
            calm = [s.seconds for s in rec.latencies if s.kind == kind and schedule.phase(s.at) == "calm"]
            abuse = [s.seconds for s in rec.latencies if s.kind == kind and schedule.phase(s.at) == "abuse"]
            ratio = p(abuse, 95) / p(calm, 95) if calm and abuse else float("nan")
            rows.append([label, *latency_cell(calm), *latency_cell(abuse), f"{ratio:.2f}"])
        headers = ["latency", "n calm", "p50", "p95", "n abuse", "p50", "p95", "p95 abuse / calm"]
        print(table(headers, rows))
        print()


def report_items(rec: Recorder) -> None:
    print("## Sessions and items\n")
    print(
        "Requests that must each be answered: transcription commits (acknowledged by "
        "`input_audio_buffer.committed`, answered by `.completed`), MT finals (answered by their "
        "final translation), agent responses (`response.created` → `response.done`), interpreter "
        "recordings (acknowledged by some source transcript in the recording's window, answered by "
        "some translated text there; bench/soak_interpreter.py). Lost = "
        "acknowledged − answered − failed, counted when the client leaves (it waits up to "
        f"{clients.DRAIN_S:.0f} s for what it is owed). Flooders leave with items still queued on "
        "purpose, so theirs are not counted as lost.\n"
    )
    rows: list[list[object]] = []
    for role in (*WELL_BEHAVED, "flooder"):
        tallies = [t for t in rec.tallies if t.role == role]
        if not tallies:
            continue
        lost: object = sum(t.lost for t in tallies) if role != "flooder" else "–"
        with_lost = sum(t.lost > 0 for t in tallies) if role != "flooder" else "–"
        rows.append(
            [
                role,
                len(tallies),
                sum(t.sent for t in tallies),
                sum(t.accepted for t in tallies),
                sum(t.answered for t in tallies),
                sum(t.failed for t in tallies),
                lost,
                with_lost,
            ]
        )
    headers = [
        "client",
        "sessions",
        "sent",
        "acknowledged",
        "answered",
        "failed",
        "lost",
        "sessions with lost",
    ]
    print(table(headers, rows))
    if rec.statuses:
        print(f"\nAgent responses by status: {dict(rec.statuses)}.")
    for name, values in rec.ratios.items():
        print(
            f"\n{name}, per session: min {min(values):.2f}, p50 {p(values, 50):.2f}, max {max(values):.2f}."
        )
    if rec.refused:
        print("\nConnections that failed to open: " + "; ".join(f"{k} ×{v}" for k, v in rec.refused.items()))
    print()


def report_errors(rec: Recorder, log_events: Counter[str], tracebacks: int, metrics: list[str]) -> None:
    print("## Errors\n")
    rows: list[list[object]] = []
    for role in (*WELL_BEHAVED, *(ABUSERS if rec.schedule.abuse else ())):
        codes = rec.errors.get(role, Counter())
        closes = rec.closes.get(role, Counter())
        rows.append(
            [
                role,
                rec.connects[role],
                ", ".join(f"{c} ×{n}" for c, n in codes.most_common()) or "none",
                ", ".join(f"{c} ×{n}" for c, n in closes.most_common()) or "–",
            ]
        )
    print(table(["client", "connections", "error events by code", "closes"], rows))
    total = sum(rec.server_errors.values())
    print(
        f"\nServer errors (type server_error, or MT processing_failed) seen by any client: **{total}**"
        + (f" ({dict(rec.server_errors)})" if total else "")
        + f". Server log: {tracebacks} Traceback lines; warning/error events: "
        + ("; ".join(f"{k} ×{v}" for k, v in log_events.most_common(12)) or "none")
        + ".\n"
    )
    if metrics:
        print("`/metrics` at the end (errors and refusals by code, audio refused from floods):\n")
        print("```\n" + "\n".join(metrics) + "\n```\n")


def report_abuse(rec: Recorder, plan: Plan) -> None:
    print("## Abusers\n")
    print(
        f"{plan.flooders} flooders (1 s appends at {plan.flood_speed:g}× real time, a commit after each "
        f"recording), {plan.oversize} oversize client (a frame of --max-message-bytes + 256 KiB = "
        f"{(plan.max_message_bytes + 256 * 1024) / 2**20:.2f} MiB, on the transcription and the MT "
        f"endpoint in turn), {plan.idle} idle clients (transcription, and MT after init every third; "
        f"server --idle-timeout {plan.idle_timeout:g} s), only in the abuse windows.\n"
    )
    rows: list[list[object]] = []
    for role in ABUSERS:
        codes = rec.errors.get(role, Counter())
        closes = rec.closes.get(role, Counter())
        expected = EXPECTED[role]
        extra = ""
        if role.startswith("oversize"):
            extra = f"server closed 1009 ×{closes.get('server closed 1009', 0)}"
        if role.startswith("idle") and (waits := rec.idle_closes.get(role)):
            extra = f"server closed it after p50 {p(waits, 50):.1f} s, max {max(waits):.1f} s"
        rows.append([role, rec.connects[role], expected, codes.get(expected, 0), extra])
    print(table(["abuser", "connections", "expected error", "got", "notes"], rows))
    print()


def rss_at(samples: Sequence[Sample], at: float) -> float:
    return min(samples, key=lambda s: abs(s.at - at)).rss_mb


def report_memory(
    samples: Sequence[Sample], schedule: Schedule, plan: Plan, health: dict[str, Any], pool: dict[str, Any]
) -> None:
    print("## Server memory\n")
    run = samples[:-1]  # the last sample is taken after every client has left
    warm = [s for s in run if s.at >= run[0].at + plan.minutes * 12] if run else []
    first, last = samples[0], samples[-1]
    rows = [
        [
            len(samples),
            f"{first.rss_mb:.0f}",
            f"{max(s.rss_mb for s in samples):.0f}",
            f"{last.rss_mb:.0f}",
            f"{slope(run):+.2f}",
            f"{slope(warm):+.2f}",
            f"{first.threads} → {last.threads} (max {max(s.threads for s in samples)})",
            f"{first.fds} → {last.fds}",
        ]
    ]
    headers = [
        "samples",
        "RSS start MB",
        "max MB",
        "end MB (clients gone)",
        "slope MB/min (whole run)",
        "slope MB/min (after the first fifth)",
        "threads",
        "open fds",
    ]
    print(
        f"VmRSS of the server process every {plan.sample_seconds:g} s; slopes are least-squares fits "
        "over the run's samples.\n"
    )
    print(table(headers, rows))
    by_minute = [s.rss_mb for s in run if (s.at - run[0].at) % 60 < plan.sample_seconds] if run else []
    print("\nRSS at each minute of the run, MB: " + ", ".join(f"{mb:.0f}" for mb in by_minute) + ".")
    if schedule.abuse and run:
        growth: dict[str, list[float]] = {"calm": [], "abuse": []}
        for k in range(10):
            start = schedule.begin + k * schedule.window
            delta = rss_at(run, start + schedule.window) - rss_at(run, start)
            growth[schedule.phase(start + 1)].append(delta)
        print(
            "RSS growth in each window, MB: calm "
            + ", ".join(f"{d:+.0f}" for d in growth["calm"])
            + "; abuse "
            + ", ".join(f"{d:+.0f}" for d in growth["abuse"])
            + "."
        )
    sessions = {k: v for k, v in health.items() if "session" in k or k == "status"}
    print(
        f"\nAfter the clients left: /health {json.dumps(sessions)}; pool idle {pool.get('idle')}/{pool.get('size')}, "
        f"quarantined {pool.get('quarantined')}.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--abuse", action="store_true", help="alternate calm and abuse windows")
    parser.add_argument("--transcription", type=int, default=3, help="transcription clients (3)")
    parser.add_argument("--mt", type=int, default=1, help="MT clients (1)")
    parser.add_argument("--agent", type=int, default=1, help="voice-agent clients (1)")
    parser.add_argument("--interpreter", type=int, default=1, help="interpreter clients (1)")
    parser.add_argument("--flooders", type=int, default=2)
    parser.add_argument("--oversize", type=int, default=1)
    parser.add_argument("--idle", type=int, default=3)
    parser.add_argument(
        "--reconnect-every", type=int, default=4, help="utterances / sentences per session (agent: +2 turns)"
    )
    parser.add_argument("--flood-speed", type=float, default=10.0, help="× real time")
    parser.add_argument("--idle-timeout", type=float, default=20.0, help="the server's, in s")
    parser.add_argument("--max-message-bytes", type=int, default=1024 * 1024, help="the server's")
    parser.add_argument("--sample-seconds", type=float, default=5.0, help="RSS sampling period")
    parser.add_argument("--log", type=Path, help="the server's log file (default: a temporary folder)")
    parser.add_argument(
        "--log-level", default="info", help="the server's (debug: each translation session's timeline)"
    )
    parser.add_argument("--dump", type=Path, help="write the RSS samples and latencies there (JSON)")
    args = parser.parse_args(argv)
    plan = Plan(
        args.minutes,
        args.abuse,
        args.transcription,
        args.mt,
        args.agent,
        args.interpreter,
        args.flooders,
        args.oversize,
        args.idle,
        args.reconnect_every,
        args.flood_speed,
        args.idle_timeout,
        args.max_message_bytes,
        args.sample_seconds,
        args.log_level,
    )
    log_path = args.log or Path(tempfile.mkdtemp(prefix="dragoman-soak-")) / "dragoman.log"
    command = " ".join(["python -m bench.soak", *(sys.argv[1:] if argv is None else argv)])
    stuff = material()
    log(
        f"{len(stuff.utterances)} utterances ({sum(len(u) for u in stuff.utterances) / clients.ASR_RATE:.0f} s), "
        f"{len(stuff.sentences)} sentences; server log {log_path}"
    )
    load_start = os.getloadavg()
    began = time.perf_counter()
    with dragoman_server.running(plan.serve_args(), log_path) as server:
        log(f"server up in {time.perf_counter() - began:.1f} s (pid {server.process.pid})")
        rec, samples = asyncio.run(soak(plan, server, stuff))
        health = get_json(server.http + "/health")
        pool = get_json(server.http + "/v1/pool")
        metrics = metric_lines(
            server.http + "/metrics",
            (
                "dragoman_errors_total",
                "dragoman_refusals_total",
                "dragoman_sessions",
                "dragoman_audio_refused_seconds_total",
            ),
        )
    load_end = os.getloadavg()
    log_events, tracebacks = server_log_problems(log_path)

    print(f"# Soak{' and abuse' if plan.abuse else ''} run\n")
    print(
        f"`{command}`: {plan.minutes:g} min; {cpu_info().describe()}; load average at start "
        f"{load_start[0]:.2f} / {load_start[1]:.2f} / {load_start[2]:.2f}, at the end "
        f"{load_end[0]:.2f} / {load_end[1]:.2f} / {load_end[2]:.2f}; Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}.\n"
    )
    print(
        f"Server: `dragoman {' '.join(plan.serve_args())}` on 127.0.0.1 (log: {log_path}). Clients: "
        f"{plan.transcription} transcription (real-time pace, 100 ms appends, {plan.reconnect_every} "
        f"utterances per session), {plan.mt} MT (2.6 words/s, {plan.reconnect_every} sentences per "
        f"session, en→de/it/zh), {plan.agent} agent ({plan.reconnect_every + 2} turns per session, "
        "text answers of at most 60 tokens, every third turn spoken), "
        f"{plan.interpreter} interpreter ({plan.reconnect_every} recordings per session at real-time "
        f"pace, {soak_interpreter.PAUSE_S:g} s of silence after each, into de/it/zh); plain `websockets` clients "
        f"(bench/soak_clients.py). Audio: {len(stuff.utterances)} utterances of the English rows of "
        f"asr.tsv (cut at {UTTERANCE_CAP_S:g} s); MT: {len(stuff.sentences)} FLORES devtest sentences.\n"
    )
    report_latency(rec)
    report_items(rec)
    report_errors(rec, log_events, tracebacks, metrics)
    if plan.abuse:
        report_abuse(rec, plan)
    report_memory(samples, rec.schedule, plan, health, pool)
    if args.dump:
        dump = {
            "rss": [[round(s.at - rec.schedule.begin, 1), round(s.rss_mb, 1)] for s in samples],
            "latencies": [
                [x.kind, round(x.at - rec.schedule.begin, 2), round(x.seconds, 3)] for x in rec.latencies
            ],
        }
        args.dump.write_text(json.dumps(dump))
    if rec.notes:
        print("<details><summary>client notes</summary>\n")
        print("```\n" + "\n".join(rec.notes) + "\n```\n")
        print("</details>\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
