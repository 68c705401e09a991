"""Machine-readable results: each benchmark appends what it measured against a goal as JSON lines
in `bench/results/<benchmark>.jsonl`, and `python -m bench.summary` writes the table at the top of
`bench/RESULTS.md` from the latest line of each goal.

A line: `goal` (what the project promises, e.g. "simultaneous MT en→de"), `metric`, `value` (a
number) with its `unit`, `target` (the goal's bound, as text) and `met` (true, false or null when
the goal has no bound), `cpu` (model and SIMD flags; the caps in force), `date` (UTC), `command`,
and `conditions` (the machine's load, the data: what a reader needs to weigh the number).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from dragoman.cpu import cpu_info

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Result:
    goal: str
    metric: str
    value: float
    unit: str
    target: str
    met: bool | None
    cpu: str
    date: str
    command: str
    conditions: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.goal, self.metric)


def this_cpu() -> str:
    """The CPU model and the SIMD levels its kernels may use here (caps included)."""
    info = cpu_info()
    return f"{info.describe()}; {os.cpu_count()} cores"


def this_command() -> str:
    """How this benchmark was run: `python -m bench.<name> <its arguments>`."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    module = spec.name if spec is not None else Path(sys.argv[0]).stem
    return " ".join(["python -m", module, *map(shlex.quote, sys.argv[1:])])


def record(
    benchmark: str,
    goal: str,
    metric: str,
    value: float,
    unit: str,
    *,
    target: str = "",
    met: bool | None = None,
    conditions: str = "",
) -> Result:
    """Append one measured result to `bench/results/<benchmark>.jsonl`, rewrite the table of
    bench/RESULTS.md from it (`bench.summary`), and return it."""
    load = os.getloadavg()[0]
    result = Result(
        goal=goal,
        metric=metric,
        value=round(float(value), 4),
        unit=unit,
        target=target,
        met=met,
        cpu=this_cpu(),
        date=time.strftime("%Y-%m-%d", time.gmtime()),
        command=this_command(),
        conditions=f"load {load:.1f} at the end; {conditions}".rstrip("; "),
    )
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / f"{benchmark}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(asdict(result), ensure_ascii=False) + "\n")
    from bench import summary  # here: bench.summary imports this module

    summary.write(RESULTS)
    return result


#: The order of the benchmarks' rows in the table: install and speech in, then out, then MT.
ORDER = ("install", "asr_streaming", "file_transcription", "agent_latency", "tts_roundtrip", "mt_simul")


def load_all(folder: Path = RESULTS) -> list[Result]:
    """Every recorded result, the benchmarks in `ORDER` (then the rest), oldest first in each."""
    results = []
    paths = sorted(
        folder.glob("*.jsonl"), key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem)
    )
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                results.append(Result(**json.loads(line)))
    return results
