"""Backends by name, imported only when chosen.

Each entry is a "module:factory" string resolved with importlib, so choosing the
Whisper backend never imports the MT stack (torch, transformers) and vice versa.
Factories take the backend's settings section and the model cache folder:
    create(settings: ASRSettings, cache_dir: Path) -> ASREngine
    create(settings: MTSettings, cache_dir: Path) -> MTEngine
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from dragoman.config import ASRSettings, MTSettings
from dragoman.engines.asr.base import ASREngine
from dragoman.engines.mt.base import MTEngine
from dragoman.errors import ConfigError

ASR_BACKENDS: dict[str, str] = {
    "whisper-ct2": "dragoman.engines.asr.whisper_ct2:create",
}

MT_BACKENDS: dict[str, str] = {
    "qwen-torch": "dragoman.engines.mt.qwen_torch:create",
    "ct2-seq2seq": "dragoman.engines.mt.ct2_seq2seq:create",
}


def asr_backends() -> list[str]:
    return sorted(ASR_BACKENDS)


def mt_backends() -> list[str]:
    return sorted(MT_BACKENDS)


def _factory(kind: str, name: str, table: Mapping[str, str]) -> Callable[..., Any]:
    target = table.get(name)
    if target is None:
        raise ConfigError(f"unknown {kind} backend {name!r}; known backends: {', '.join(sorted(table))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        # A backend whose libraries are not installed; the others still work.
        raise ConfigError(f"{kind} backend {name!r} cannot be loaded: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"{kind} backend {name!r}: {target} is not a factory")
    return cast(Callable[..., Any], factory)


def create_asr_engine(settings: ASRSettings, cache_dir: Path) -> ASREngine:
    """Build the ASR backend named by `settings.backend`."""
    engine = _factory("ASR", settings.backend, ASR_BACKENDS)(settings, cache_dir)
    if not isinstance(engine, ASREngine):
        raise ConfigError(
            f"ASR backend {settings.backend!r} built a {type(engine).__name__}, not an ASREngine"
        )
    return engine


def create_mt_engine(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """Build the MT backend named by `settings.backend`."""
    engine = _factory("MT", settings.backend, MT_BACKENDS)(settings, cache_dir)
    if not isinstance(engine, MTEngine):
        raise ConfigError(f"MT backend {settings.backend!r} built a {type(engine).__name__}, not an MTEngine")
    return engine
