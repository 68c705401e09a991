"""Soak and abuse run against one real server: `python -m bench.soak [--minutes 10] [--abuse]`.

One `dragoman serve --services transcription mt agent interpreter` on a free loopback port,
and for `--minutes` concurrent sessions of real speech that reconnect (a new session every
`--reconnect-every` utterances, sentences or turns): transcription (recordings of
../shared/eval/asr.tsv at real-time pace), MT (FLORES sentences fed word by word), the
voice agent (text turns, and every third turn spoken) and the interpreter (the same
recordings spoken on and on into a translation session). The clients are in
`bench/soak_clients.py`, `bench/soak_interpreter.py` and `bench/soak_abusers.py`; the run is
`bench/soak_run.py`, the report `bench/soak_report.py`.

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
from collections.abc import Sequence
from pathlib import Path

from bench import server as dragoman_server
from bench import soak_interpreter
from bench.report import log
from bench.soak_clients import ASR_RATE
from bench.soak_report import report_abuse, report_errors, report_items, report_latency, report_memory
from bench.soak_run import UTTERANCE_CAP_S, Plan, get_json, material, metric_lines, server_log_problems, soak
from dragoman.cpu import cpu_info


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
        f"{len(stuff.utterances)} utterances ({sum(len(u) for u in stuff.utterances) / ASR_RATE:.0f} s), "
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
