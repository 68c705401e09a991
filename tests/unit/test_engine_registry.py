"""Backends are chosen by name and imported only when chosen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dragoman.config import ASRSettings, MTSettings
from dragoman.engines import registry
from dragoman.errors import ConfigError
from tests.unit.test_workers import FakeEngine


def fake_asr(settings: ASRSettings, cache_dir: Path) -> FakeEngine:
    engine = FakeEngine()
    engine.name = f"{settings.model}@{cache_dir.name}"
    return engine


def not_an_engine(settings: MTSettings, cache_dir: Path) -> object:
    return object()


def test_known_backends() -> None:
    assert registry.asr_backends() == ["moonshine", "openai-transcriptions", "whisper-ct2"]
    assert registry.mt_backends() == [
        "chat-translation",
        "ct2-seq2seq",
        "mt-protocol",
        "qwen-llama",
        "qwen-torch",
    ]


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="whisper-ct2"):
        registry.create_asr_engine(ASRSettings(backend="vosk"), Path("/nonexistent"))
    with pytest.raises(ConfigError, match="ct2-seq2seq, mt-protocol, qwen-llama, qwen-torch"):
        registry.create_mt_engine(MTSettings(backend="marian"), Path("/nonexistent"))


def test_factory_gets_settings_and_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(registry.ASR_BACKENDS, "fake", f"{__name__}:fake_asr")
    engine = registry.create_asr_engine(ASRSettings(backend="fake", model="m"), tmp_path)
    assert isinstance(engine, FakeEngine) and engine.name == f"m@{tmp_path.name}"


def test_factory_must_build_the_right_kind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(registry.MT_BACKENDS, "bogus", f"{__name__}:not_an_engine")
    with pytest.raises(ConfigError, match="not an MTEngine"):
        registry.create_mt_engine(MTSettings(backend="bogus"), tmp_path)
    monkeypatch.setitem(registry.MT_BACKENDS, "gone", "dragoman.engines.no_such_module:create")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        registry.create_mt_engine(MTSettings(backend="gone"), tmp_path)


def test_importing_the_registry_loads_no_backend() -> None:
    code = (
        "import sys, dragoman.engines.registry\n"
        "heavy = {'ctranslate2', 'torch', 'transformers', 'dragoman.engines.asr.whisper_ct2'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
