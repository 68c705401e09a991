"""One WER for every test and benchmark (`dragoman.tools.wer`), and where the eval set is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.errors import ConfigError
from dragoman.tools import eval_set
from dragoman.tools.wer import edit_distance, normalize, wer


def test_edit_distance_counts_substitutions_deletions_and_insertions() -> None:
    assert edit_distance(["a", "b", "c"], ["a", "b", "c"]) == 0
    assert edit_distance(["a", "b", "c"], ["a", "x", "c"]) == 1
    assert edit_distance(["a", "b", "c"], ["a", "c"]) == 1
    assert edit_distance(["a", "b", "c"], ["a", "b", "c", "d", "e"]) == 2
    assert edit_distance([], ["a", "b"]) == 2


def test_case_punctuation_and_numbers_do_not_count() -> None:
    assert normalize("Hello, World!") == "hello world"
    assert wer(["It costs twenty five dollars."], ["it costs $25"]) == 0.0
    assert wer(["The cat sat."], ["the cat sat on"]) == pytest.approx(1 / 3)


def test_the_rate_is_over_the_whole_corpus() -> None:
    # 1 error in 2 words and 0 in 8: 1 / 10, not the mean of 0.5 and 0.
    long = "cats sit on mats all day long now"
    assert wer(["red blue", long], ["red green", long]) == pytest.approx(0.1)


def test_chinese_is_scored_by_characters() -> None:
    assert wer(["今天天气很好。"], ["今天天气不好"], "zh") == pytest.approx(1 / 6)


def test_mismatched_or_empty_references_are_refused() -> None:
    with pytest.raises(ValueError):
        wer(["a"], [])
    with pytest.raises(ValueError):
        wer([""], ["a"])


def test_the_eval_set_is_named_by_the_variable_or_found_beside_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(eval_set.VARIABLE, str(tmp_path))
    assert eval_set.eval_path("asr.tsv") == tmp_path / "asr.tsv"
    monkeypatch.setenv(eval_set.VARIABLE, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="is not a folder"):
        eval_set.eval_dir()
    monkeypatch.delenv(eval_set.VARIABLE)
    checkout = eval_set.source_checkout()
    assert checkout is not None and (checkout / "pyproject.toml").is_file()
    monkeypatch.setattr(eval_set, "source_checkout", lambda: None)  # as in an installed wheel
    with pytest.raises(ConfigError, match=eval_set.VARIABLE):
        eval_set.eval_dir()


REPO = Path(__file__).resolve().parents[2]


def python_files() -> list[Path]:
    """The project's Python, less this test (which names what it looks for)."""
    folders = ("src", "tests", "bench", "harness")
    paths = (path for folder in folders for path in (REPO / folder).rglob("*.py"))
    return sorted(path for path in paths if path != Path(__file__).resolve())


def test_only_this_module_normalises_and_scores_text() -> None:
    """Every test and benchmark scores with `dragoman.tools.wer`: nothing else normalises with
    Whisper's normalisers or scores with jiwer, so two scores never disagree on what a word is."""
    own = REPO / "src" / "dragoman" / "tools" / "wer.py"
    marks = ("import jiwer", "from jiwer", "TextNormalizer(")
    found = [
        str(path.relative_to(REPO))
        for path in python_files()
        if path != own and any(mark in path.read_text(encoding="utf-8") for mark in marks)
    ]
    assert len(python_files()) > 100
    assert found == []


def test_only_eval_set_knows_where_the_eval_files_lie() -> None:
    """Tests and benchmarks reach the eval set's files through `eval_set` (its folder, its file
    names), never by a path of their own beside the checkout."""
    own = REPO / "src" / "dragoman" / "tools" / "eval_set.py"
    marks = ('"shared"', "flores200_devtest_first100")
    found = [
        str(path.relative_to(REPO))
        for path in python_files()
        if path != own and any(mark in path.read_text(encoding="utf-8") for mark in marks)
    ]
    assert found == []
