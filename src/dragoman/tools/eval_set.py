"""Where the eval set lies, for the tests, the benchmarks and `dragoman mt calibrate`.

The eval set is real recordings and parallel text collected from public repositories
(LibriSpeech, FLEURS, FLORES-200, Tatoeba, newstest, the IWSLT 2026 dev talks; each row names
its source and licence). It is never copied into the repository: `DRAGOMAN_EVAL_DIR` names its
folder, and a source checkout finds it without the variable in `shared/eval` beside itself
(the folder that holds the checkout). An installed package has no such neighbour, so there,
without the variable, asking for it is a `ConfigError` that says what to set.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from dragoman.errors import ConfigError

#: Names the eval set's folder.
VARIABLE = "DRAGOMAN_EVAL_DIR"
#: Its four-way FLORES-200 devtest excerpt (en, de, it, zh; first 100 lines).
FLORES = "mt/flores200_devtest_first100_en-de-it-zh.tsv"


def source_checkout() -> Path | None:
    """The repository this package runs from, when it runs from a source checkout."""
    package = Path(__file__).resolve().parents[1]  # src/dragoman
    root = package.parents[1]
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def eval_dir() -> Path:
    """The eval set's folder: `DRAGOMAN_EVAL_DIR`, else `shared/eval` beside a source checkout."""
    given = os.environ.get(VARIABLE, "").strip()
    if given:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise ConfigError(f"{VARIABLE}={given} is not a folder")
        return path
    checkout = source_checkout()
    beside = checkout.parent / "shared" / "eval" if checkout is not None else None
    if beside is None or not beside.is_dir():
        raise ConfigError(
            f"the eval set was not found: set {VARIABLE} to its folder"
            + (f" (looked in {beside})" if beside is not None else "")
        )
    return beside


def eval_path(*parts: str) -> Path:
    """A file of the eval set, e.g. `eval_path("asr", "en", "en_jfk_inaugural_1961.flac")`."""
    return eval_dir().joinpath(*parts)


def asr_rows(language: str | None = None) -> list[dict[str, str]]:
    """The rows of `asr.tsv` (file, language, channel, reference_text, source, licence, notes, ...),
    of one language or all."""
    with eval_path("asr.tsv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row for row in rows if language is None or row["language"] == language]


def reference(file: str) -> str:
    """The reference transcript of one recording of `asr.tsv` (its `file` column)."""
    for row in asr_rows():
        if row["file"] == file:
            return row["reference_text"]
    raise LookupError(f"{file} is not in the eval set's asr.tsv")
