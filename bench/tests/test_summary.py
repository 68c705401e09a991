"""The headline table of bench/RESULTS.md is what `python -m bench.summary` writes from the
recorded results: a result recorded without rewriting the table, or a row edited by hand, fails."""

from __future__ import annotations

from bench.results import RESULTS, load_all
from bench.summary import END, RESULTS_MD, START, latest, rewrite, table


def test_the_results_table_is_in_step_with_the_recorded_results() -> None:
    results = load_all(RESULTS)
    assert len(latest(results)) > 10
    markdown = RESULTS_MD.read_text(encoding="utf-8")
    assert START in markdown and END in markdown
    assert rewrite(markdown, table(results)) == markdown
