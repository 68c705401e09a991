"""`make install`'s recipe: what makes it run again, and one llama-cpp-python version."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAKEFILE = (REPO / "Makefile").read_text(encoding="utf-8")


def test_the_install_stamp_is_remade_when_its_inputs_change() -> None:
    """A new llama.cpp version or flag (Makefile), a dependency (pyproject.toml) or a pinned
    version (constraints.txt) reinstalls; before, a bump in the Makefile did not."""
    (rule,) = re.findall(r"^\$\(STAMP\):(.*)$", MAKEFILE, flags=re.MULTILINE)
    variables = dict(re.findall(r"^([A-Z_]+) :?= (\S+)$", MAKEFILE, flags=re.MULTILINE))
    inputs = {variables.get(word[2:-1], word) if word.startswith("$(") else word for word in rule.split()}
    assert {"Makefile", "pyproject.toml", "constraints.txt", "requirements-nodeps.txt"} <= inputs
    assert "scripts/build_llama_wheel.py" in inputs


def test_llama_cpp_python_has_one_version() -> None:
    """The Makefile builds the version pyproject declares and the lock pins."""
    (built,) = re.findall(r"^LLAMA_CPP_VERSION := (\S+)$", MAKEFILE, flags=re.MULTILINE)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    constraints = (REPO / "constraints.txt").read_text(encoding="utf-8")
    assert re.findall(r'"llama-cpp-python==([^"]+)"', pyproject) == [built]
    assert re.findall(r"^llama-cpp-python==(\S+)$", constraints, flags=re.MULTILINE) == [built]
