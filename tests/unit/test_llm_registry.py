"""LLM backends are chosen by name in settings and imported only when chosen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dragoman.config import LLMSettings, load_settings
from dragoman.engines import registry
from dragoman.engines.llm.base import LLMEngine
from dragoman.errors import ConfigError, ModelUnavailable


def test_known_backends_and_defaults() -> None:
    assert registry.llm_backends() == ["chat-completions", "llama-cpp", "responses"]
    settings = load_settings()
    assert settings.llm.backend == "llama-cpp" and settings.llm.model == "auto"


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_LLM__BACKEND", "chat-completions")
    monkeypatch.setenv("DRAGOMAN_LLM__BASE_URL", "http://10.0.0.5:8000/v1")
    overrides: dict[str, Any] = {"llm.remote_model": "qwen"}  # a dotted key: no keyword argument
    settings = load_settings(**overrides)
    assert (settings.llm.backend, settings.llm.base_url, settings.llm.remote_model) == (
        "chat-completions",
        "http://10.0.0.5:8000/v1",
        "qwen",
    )


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="chat-completions, llama-cpp, responses"):
        registry.create_llm_engine(LLMSettings(backend="gpt"), Path("/nonexistent"))


@pytest.mark.parametrize("backend", ["chat-completions", "responses"])
def test_remote_backends_build_without_touching_the_server(backend: str) -> None:
    settings = LLMSettings(backend=backend, base_url="http://127.0.0.1:9/v1", remote_model="m")
    engine = registry.create_llm_engine(settings, Path("/nonexistent"))
    try:
        assert isinstance(engine, LLMEngine)
        assert engine.capabilities.remote and not engine.capabilities.prefix_cache
        info = engine.describe()
        assert (info.name, info.backend, info.device) == ("m", backend, "remote")
        engine.forget("nobody")  # nothing cached: a no-op, not an error
    finally:
        engine.close()


def test_a_remote_backend_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        registry.create_llm_engine(LLMSettings(backend="responses", base_url=""), Path("/nonexistent"))


def test_a_missing_model_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="neither a packaged model"):
        registry.create_llm_engine(LLMSettings(model=str(tmp_path / "none.gguf")), tmp_path)
