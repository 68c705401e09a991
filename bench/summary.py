"""Write the headline table of `bench/RESULTS.md` from `bench/results/*.jsonl`.

    python -m bench.summary            # rewrite the table between the markers in RESULTS.md
    python -m bench.summary --print    # print it instead

Every `bench.results.record` rewrites it too, so the table is never behind the results.

One row per goal and metric, the latest result by date (a later line of the same date wins).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.results import RESULTS, Result, load_all

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"
START = "<!-- summary: written by `python -m bench.summary` from bench/results/*.jsonl; do not edit -->"
END = "<!-- end of summary -->"


def latest(results: list[Result]) -> list[Result]:
    """The latest result of each (goal, metric), in the order the goals first appear."""
    chosen: dict[tuple[str, str], Result] = {}
    for result in results:
        held = chosen.get(result.key)
        if held is None or result.date >= held.date:
            chosen[result.key] = result
    return list(chosen.values())


def _value(result: Result) -> str:
    number = f"{result.value:g}"
    return f"{number} {result.unit}".strip() if result.unit not in ("×", "%") else f"{number}{result.unit}"


def _met(result: Result) -> str:
    return {True: "met", False: "**not met**", None: ""}[result.met]


def table(results: list[Result]) -> str:
    lines = [
        "| goal | metric | value | target | | CPU | date | command |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    for r in latest(results):
        cells = [r.goal, r.metric, _value(r), r.target, _met(r), r.cpu, r.date, f"`{r.command}`"]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def rewrite(markdown: str, rendered: str) -> str:
    if START not in markdown or END not in markdown:
        raise SystemExit(f"{RESULTS_MD} has no summary markers")
    head, rest = markdown.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{rendered}\n{END}{tail}"


def write(folder: Path | None = None, markdown: Path | None = None) -> None:
    """Rewrite the table of `markdown` (RESULTS.md) from the results in `folder` (bench/results)."""
    markdown = markdown or RESULTS_MD
    rendered = table(load_all(folder or RESULTS))
    markdown.write_text(rewrite(markdown.read_text(encoding="utf-8"), rendered), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print the table instead of writing it")
    args = parser.parse_args()
    if args.print:
        print(table(load_all(RESULTS)))
        return
    write()
    print(
        f"wrote {RESULTS_MD.relative_to(Path.cwd()) if RESULTS_MD.is_relative_to(Path.cwd()) else RESULTS_MD}"
    )


if __name__ == "__main__":
    main()
