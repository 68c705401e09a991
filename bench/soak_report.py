"""The soak's markdown report: latency, sessions and items, errors, abusers, server memory.

Each `report_*` prints one section to stdout from the run's `Recorder` (and the server's
samples and state for the memory section).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.report import table
from bench.soak_connection import DRAIN_S
from bench.soak_recorder import Recorder, Schedule
from bench.soak_run import Plan, Sample

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


def slope(samples: Sequence[Sample]) -> float:
    """Least-squares MB/min."""
    if len(samples) < 3:
        return float("nan")
    minutes = np.array([s.at for s in samples]) / 60
    return float(np.polyfit(minutes - minutes[0], [s.rss_mb for s in samples], 1)[0])


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
        f"{DRAIN_S:.0f} s for what it is owed). Flooders leave with items still queued on "
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
