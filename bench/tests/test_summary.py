"""The headline table of bench/RESULTS.md is what `python -m bench.summary` writes from the
recorded results: a result recorded without rewriting the table, or a row edited by hand, fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import results, summary
from bench.results import RESULTS, load_all
from bench.summary import END, RESULTS_MD, START, latest, rewrite, table


def test_the_results_table_is_in_step_with_the_recorded_results() -> None:
    results = load_all(RESULTS)
    assert len(latest(results)) > 10
    markdown = RESULTS_MD.read_text(encoding="utf-8")
    assert START in markdown and END in markdown
    assert rewrite(markdown, table(results)) == markdown


def test_recording_a_result_rewrites_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    markdown = tmp_path / "RESULTS.md"
    markdown.write_text(f"# Results\n\n{START}\nold table\n{END}\n\nThe notes.\n", encoding="utf-8")
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(summary, "RESULTS_MD", markdown)
    results.record(
        "asr_streaming", "streaming WER", "streaming / offline WER", 1.04, "×", target="≤ 1.15×", met=True
    )
    text = markdown.read_text(encoding="utf-8")
    assert "old table" not in text and text.endswith(f"{END}\n\nThe notes.\n")
    (row,) = [line for line in text.splitlines() if line.startswith("| streaming WER |")]
    assert "| 1.04× | ≤ 1.15× | met |" in row
