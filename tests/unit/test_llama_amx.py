"""Which GGUF the AMX kernels load (`engines/llama_amx.py`): the decision and the cache, not
llama.cpp's quantiser (tests/engine/test_llama_amx.py runs that on an AMX CPU)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

from dragoman.cpu import cpu_info
from dragoman.engines import llama_amx
from dragoman.engines.llama_backend import Backend
from dragoman.errors import ConfigError


def write_gguf(path: Path, file_type: int) -> Path:
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_file_type(file_type)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def converted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, Path]]:
    """The kernels are AMX ones, and each conversion is recorded (and writes a stand-in copy)."""
    calls: list[tuple[Path, Path]] = []

    def convert(source: Path, target: Path, form: str) -> None:
        assert target.name.endswith(f"-{form}.gguf")
        calls.append((source, target))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())

    monkeypatch.setattr(llama_amx, "load_backend", lambda: Backend("sapphirerapids", "best for this CPU"))
    monkeypatch.setattr(llama_amx, "_convert", convert)
    monkeypatch.setattr(llama_amx, "tiles_permitted", lambda: True)
    monkeypatch.delenv(llama_amx.WEIGHTS_VARIABLE, raising=False)
    return calls


def test_a_q4_k_m_gguf_is_converted_once_into_the_cache(
    tmp_path: Path, converted: list[tuple[Path, Path]]
) -> None:
    source = write_gguf(tmp_path / "model.gguf", 15)
    cache = tmp_path / "cache"
    first = llama_amx.weights_for_kernels(source, cache)
    again = llama_amx.weights_for_kernels(source, cache)
    assert first == again != source
    assert first.parent == cache / llama_amx.FOLDER and first.name.startswith("model-")
    assert first.name.endswith("-q8_0.gguf")  # the default form: the same model, to its 8-bit grid
    assert converted == [(source, first)]


def test_a_changed_source_converts_again(tmp_path: Path, converted: list[tuple[Path, Path]]) -> None:
    source = write_gguf(tmp_path / "model.gguf", 14)
    first = llama_amx.weights_for_kernels(source, tmp_path)
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    other = write_gguf(tmp_path / "model-b.gguf", 15)
    kept = llama_amx.weights_for_kernels(other, tmp_path)  # another model whose name begins alike
    second = llama_amx.weights_for_kernels(source, tmp_path)
    assert second != first and len(converted) == 3
    assert second.exists() and kept.exists() and not first.exists()  # the stale copy is gone


@pytest.mark.parametrize("file_type", [0, 1, 2, 3, 7, 18])
def test_other_ggufs_load_as_they_are(
    tmp_path: Path, converted: list[tuple[Path, Path]], file_type: int
) -> None:
    source = write_gguf(tmp_path / "model.gguf", file_type)
    assert llama_amx.weights_for_kernels(source, tmp_path) == source
    assert converted == []


def test_the_q4_1_form_replaces_the_q8_0_copy(
    tmp_path: Path, converted: list[tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_gguf(tmp_path / "model.gguf", 15)
    q8 = llama_amx.weights_for_kernels(source, tmp_path)
    monkeypatch.setenv(llama_amx.WEIGHTS_VARIABLE, "Q4_1")
    q4 = llama_amx.weights_for_kernels(source, tmp_path)
    assert q4.name.endswith("-q4_1.gguf") and q4.exists() and not q8.exists()


def test_an_unknown_form_is_a_configuration_error(
    tmp_path: Path, converted: list[tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(llama_amx.WEIGHTS_VARIABLE, "q2_k")
    with pytest.raises(ConfigError, match="q8_0, q4_1, keep"):
        llama_amx.weights_for_kernels(write_gguf(tmp_path / "model.gguf", 15), tmp_path)


def _keep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(llama_amx.WEIGHTS_VARIABLE, "keep")


def _kernels_without_amx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_amx, "load_backend", lambda: Backend("zen4", "best for this CPU"))


def _no_tile_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_amx, "tiles_permitted", lambda: False)


@pytest.mark.parametrize("condition", [_keep, _kernels_without_amx, _no_tile_permission])
def test_a_q4_k_m_gguf_loads_as_it_is(
    tmp_path: Path,
    converted: list[tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
    condition: Callable[[pytest.MonkeyPatch], None],
) -> None:
    """With `keep`, on kernels without AMX, and where Linux denies the process AMX tile data."""
    condition(monkeypatch)
    source = write_gguf(tmp_path / "model.gguf", 15)
    assert llama_amx.weights_for_kernels(source, tmp_path) == source
    assert converted == []


@pytest.mark.skipif(not cpu_info().amx, reason="AMX tiles need a CPU with AMX")
def test_linux_lets_this_process_use_amx_tiles() -> None:
    assert llama_amx.tiles_permitted()
