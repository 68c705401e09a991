"""The README's checkable statements: its length, its links, its code, its flags and the
first-install time it quotes (the one `bench/results/install.jsonl` recorded)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from dragoman.cli import _parser

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_it_is_a_front_page() -> None:
    assert 100 < len(README.splitlines()) <= 160


def test_every_link_lands_on_a_file_of_the_repository() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert len(local) > 10
    assert [t for t in local if ".." in Path(t).parts or not (REPO / t).is_file()] == []


def test_every_python_snippet_parses() -> None:
    snippets = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    assert len(snippets) >= 6  # one per service
    for snippet in snippets:
        ast.parse(snippet)


def test_every_flag_it_names_is_a_flag_of_serve() -> None:
    parser = _parser()
    serve = next(
        action.choices["serve"]
        for action in parser._actions
        if isinstance(action.choices, dict) and "serve" in action.choices
    )
    known = {option for action in serve._actions for option in action.option_strings}
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", README))
    assert len(named) >= 4
    assert named - known == set()


def test_the_first_install_time_is_the_measured_one() -> None:
    rows = [
        json.loads(line)
        for line in (REPO / "bench" / "results" / "install.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    wall = [row for row in rows if row["metric"].startswith("fresh make install, wall time")][-1]
    (row,) = [line for line in README.splitlines() if line.startswith("| first `make install` |")]
    quoted = re.search(r"(\d+) min (\d+) s", row)
    assert quoted is not None, row
    minutes, seconds = map(int, quoted.groups())
    assert abs(minutes + seconds / 60 - wall["value"]) < 0.05, (row, wall)
    vendor = next(name for name in ("AMD EPYC", "Intel Xeon") if name.split()[-1] in wall["cpu"])
    assert wall["date"] in row and vendor in row and "2-core" in row
