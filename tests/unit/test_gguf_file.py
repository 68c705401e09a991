"""Which GGUF a model path names (`weights.gguf_file`): a user's file, or a folder holding one."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.errors import ModelUnavailable
from dragoman.weights import gguf_file


def test_a_file_is_itself(tmp_path: Path) -> None:
    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF")
    assert gguf_file(model) == model


def test_a_folder_names_its_one_gguf(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    (tmp_path / "README.md").write_text("weights")
    assert gguf_file(tmp_path) == tmp_path / "model.gguf"


@pytest.mark.parametrize("count", [0, 2])
def test_a_folder_without_exactly_one_gguf_is_refused(tmp_path: Path, count: int) -> None:
    for i in range(count):
        (tmp_path / f"part{i}.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelUnavailable, match=f"holds {count} .gguf files"):
        gguf_file(tmp_path)
