"""The soak's clock and its record: the `Schedule` of calm and abuse windows, and the `Recorder`.

Every client writes into one `Recorder`: latencies (placed by when their request went),
error events by role and code, closes, connections, a `Tally` per session of the requests
that must each be answered, and notes for the report (`bench/soak_report.py`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

#: MT codes that mean the server dropped work (the protocol's only server-side failure).
MT_SERVER_CODES = frozenset({"processing_failed"})


@dataclass(frozen=True)
class Schedule:
    """The run's clock: `seconds` from `begin`; with `abuse`, ten windows, calm and abuse in turn.

    Each fifth of the run is then one calm window followed by one abuse window, so the first
    and the last fifth carry the same mix and a calm/abuse comparison spans the whole run.
    """

    begin: float
    seconds: float
    abuse: bool

    @property
    def end(self) -> float:
        return self.begin + self.seconds

    @property
    def window(self) -> float:
        return self.seconds / 10

    def over(self) -> bool:
        return time.monotonic() >= self.end

    def phase(self, at: float) -> str:
        if not self.abuse:
            return "calm"
        return "abuse" if int((at - self.begin) // self.window) % 2 else "calm"

    def fifth(self, at: float) -> int:
        return min(4, max(0, int((at - self.begin) / (self.seconds / 5))))

    async def next_abuse(self) -> tuple[float, float] | None:
        """Sleep until an abuse window is open; its (start, end), or None once the run is over."""
        now = time.monotonic()
        index = max(0, int((now - self.begin) // self.window))
        index += 1 - index % 2  # a calm window: the next one
        start = self.begin + index * self.window
        if not self.abuse or start >= self.end:
            return None
        await asyncio.sleep(max(0.0, start - now))
        return start, min(start + self.window, self.end)


@dataclass(frozen=True)
class Latency:
    kind: str
    #: When the request went (monotonic): it places the sample in a fifth and a phase.
    at: float
    seconds: float


@dataclass
class Tally:
    """One session's requests that must each get their answer (commits, MT finals, responses)."""

    role: str
    sent: int = 0
    #: Acknowledged: `input_audio_buffer.committed`, an MT final sent, `response.created`.
    accepted: int = 0
    answered: int = 0
    failed: int = 0

    @property
    def lost(self) -> int:
        return self.accepted - self.answered - self.failed


@dataclass
class Recorder:
    schedule: Schedule
    latencies: list[Latency] = field(default_factory=list)
    errors: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: Errors the server counts as its own fault (type server_error, MT processing_failed).
    server_errors: Counter[str] = field(default_factory=Counter)
    closes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    connects: Counter[str] = field(default_factory=Counter)
    #: Connections that failed to open, by role and exception.
    refused: Counter[str] = field(default_factory=Counter)
    tallies: list[Tally] = field(default_factory=list)
    #: Seconds from connect to the server's idle close, for the idle abusers.
    idle_closes: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: Agent response statuses.
    statuses: Counter[str] = field(default_factory=Counter)
    #: Per-session ratios worth a line in the report (the interpreter's audio out / in).
    ratios: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: Unexpected happenings worth a line in the report.
    notes: list[str] = field(default_factory=list)

    def latency(self, kind: str, at: float, seconds: float) -> None:
        self.latencies.append(Latency(kind, at, seconds))

    def tally(self, role: str) -> Tally:
        tally = Tally(role)
        self.tallies.append(tally)
        return tally

    def error(self, role: str, event: dict[str, Any]) -> str:
        """Count an error event (a realtime `error`, its `.failed` item, or an MT error); its code."""
        detail = event.get("error") if isinstance(event.get("error"), dict) else event
        assert isinstance(detail, dict)
        code = str(detail.get("code") or detail.get("type") or "?")
        self.errors[role][code] += 1
        if detail.get("type") == "server_error" or code == "server_error" or code in MT_SERVER_CODES:
            self.server_errors[f"{role}: {code}"] += 1
            self.note(f"{role}: {code}: {str(detail.get('message'))[:200]}")
        return code

    def note(self, line: str) -> None:
        if len(self.notes) < 200:
            self.notes.append(f"{time.monotonic() - self.schedule.begin:7.1f} s  {line}")
