"""How busy other processes keep the cores this process runs on.

The embedded LLM borrows the core it leaves the other engines while none of them computes
(`engines.llama_threads`), but that is only this process's view. A process beside the
server (another server, a build, a test run, a neighbour on a VM's host) that keeps a core
busy makes the borrowed llama.cpp thread wait at each barrier: with other processes keeping
1 to 1.5 of a 2-core machine's cores busy, a 1.5B turn decoded 2.9 tok/s on 2 threads against
12.6 on 1 (docs/agent.md).
So the LLM also asks this module how many cores others used lately, from the kernel's
counters: the busy time of this process's cores (`/proc/stat`, steal included) less this
process's own (`/proc/self/stat`), over the last window of a few hundred milliseconds.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Clock ticks a second of the kernel's CPU counters.
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Ticks:
    """Busy clock ticks so far: of this process's cores, all processes; of this process alone."""

    cores_busy: int
    own: int


def read_ticks(stat: str, self_stat: str, cores: frozenset[int]) -> Ticks:
    """`Ticks` from the texts of /proc/stat and /proc/self/stat, on `cores` (empty: every core)."""
    busy = 0
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or (cores and int(name[3:]) not in cores):
            continue
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        values = [int(v) for v in rest.split()[:8]]
        values += [0] * (8 - len(values))
        busy += sum(values) - values[3] - values[4]
    fields = self_stat.rpartition(")")[2].split()  # the command name may hold spaces
    return Ticks(busy, int(fields[11]) + int(fields[12]))  # utime, stime


def _proc_ticks() -> Ticks | None:
    try:
        cores = frozenset(os.sched_getaffinity(0))
        stat = Path("/proc/stat").read_text(encoding="ascii")
        self_stat = Path("/proc/self/stat").read_text(encoding="utf-8", errors="replace")
        return read_ticks(stat, self_stat, cores)
    except (OSError, AttributeError, ValueError, IndexError):
        return None  # not Linux, or no /proc


class OthersLoad:
    """The cores other processes kept busy over the last complete window (None: unknown)."""

    def __init__(
        self,
        window_s: float = 0.25,
        read: Callable[[], Ticks | None] = _proc_ticks,
        clock: Callable[[], float] = time.monotonic,
        hz: int = _HZ,
    ) -> None:
        self.window_s = window_s
        self._read = read
        self._clock = clock
        self._hz = hz
        self._lock = threading.Lock()
        self._base: tuple[float, Ticks] | None = None
        self._cores: float | None = None

    def cores(self) -> float | None:
        """Cores' worth of busy time others took in the latest window that has ended; cheap
        enough for every token (two small file reads once a window)."""
        with self._lock:
            now = self._clock()
            if self._base is not None and now - self._base[0] < self.window_s:
                return self._cores
            ticks = self._read()
            if ticks is None:
                self._base, self._cores = None, None
                return None
            if self._base is not None:
                since, before = self._base
                others = (ticks.cores_busy - before.cores_busy) - (ticks.own - before.own)
                self._cores = max(0.0, others / self._hz / (now - since))
            self._base = (now, ticks)
            return self._cores


#: The process's one view, shared by whatever asks.
OTHERS = OthersLoad()
