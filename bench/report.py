"""What every benchmark prints: progress on stderr, markdown tables and the run's header on
stdout, and percentiles of what it measured."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence

import numpy as np

from dragoman.cpu import cpu_info


def log(message: str) -> None:
    """A progress line on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, whole: bool = False) -> str:
    """A markdown table. Floats are written with 3 significant digits (whole from 100 on), or
    `whole` (milliseconds); a NaN, a figure that could not be measured, as a dash."""

    def cell(value: object) -> str:
        if not isinstance(value, float):
            return str(value)
        if value != value:
            return "–"
        return f"{value:.0f}" if whole or abs(value) >= 100 else f"{value:.3g}"

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (interpolated) of the values that are not NaN; NaN when none are."""
    kept = [v for v in values if v == v]
    return float(np.percentile(kept, q)) if kept else float("nan")


def header(title: str, setup: str = "") -> None:
    """The run's title, then `setup` (what the run is on) with the CPU, the load at its start and
    the date."""
    load_avg = os.getloadavg()
    print(f"# {title}\n")
    print(
        f"{setup}{cpu_info().describe()}; load average at start {load_avg[0]:.2f} / {load_avg[1]:.2f} / "
        f"{load_avg[2]:.2f}; Python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M')}. "
        "Data: ../shared/eval.\n"
    )
