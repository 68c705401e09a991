"""One llama.cpp model per GGUF file, shared by the engines that run it (engines.llama_models)."""

from __future__ import annotations

from pathlib import Path

from dragoman.engines.llama_models import SharedModels


class Loaded:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.freed = False


def models() -> tuple[SharedModels, list[Loaded]]:
    loaded: list[Loaded] = []

    def load(path: Path) -> Loaded:
        loaded.append(Loaded(path))
        return loaded[-1]

    def free(model: Loaded) -> None:
        model.freed = True

    return SharedModels(load, free), loaded


def test_two_engines_on_one_file_share_one_load(tmp_path: Path) -> None:
    shared, loaded = models()
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "link.gguf").symlink_to(gguf)
    mt = shared.acquire(gguf)
    llm = shared.acquire(tmp_path / "link.gguf")  # the same file by another name
    assert mt is llm and len(loaded) == 1 and shared.loads == 1
    assert shared.users(gguf) == 2


def test_the_model_is_freed_when_its_last_engine_lets_go(tmp_path: Path) -> None:
    shared, loaded = models()
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    first, second = shared.acquire(gguf), shared.acquire(gguf)
    shared.release(first)
    assert not loaded[0].freed
    shared.release(second)
    assert loaded[0].freed and shared.users(gguf) == 0
    again = shared.acquire(gguf)  # loaded anew once it was freed
    assert again is not first and shared.loads == 2


def test_different_files_load_apart(tmp_path: Path) -> None:
    shared, loaded = models()
    small, big = tmp_path / "0.5b.gguf", tmp_path / "1.5b.gguf"
    small.write_bytes(b"GGUF")
    big.write_bytes(b"GGUF")
    assert shared.acquire(small) is not shared.acquire(big)
    assert [m.path.name for m in loaded] == ["0.5b.gguf", "1.5b.gguf"]
