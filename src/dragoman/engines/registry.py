"""Backends by name, imported only when chosen.

Each entry is a "module:factory" string resolved with importlib, so choosing the
Whisper backend never imports the MT stack (torch, transformers) and vice versa.
Factories take the backend's settings section and the model cache folder:
    create(settings: ASRSettings, cache_dir: Path) -> ASREngine
    create(settings: MTSettings, cache_dir: Path) -> MTEngine
    create(settings: LLMSettings, cache_dir: Path) -> LLMEngine
    create(settings: TTSSettings, cache_dir: Path) -> TTSEngine
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from dragoman.config import ASRSettings, LLMSettings, MTSettings, TTSSettings
from dragoman.engines.asr.base import ASREngine
from dragoman.engines.llm.base import LLMEngine
from dragoman.engines.mt.base import MTEngine
from dragoman.engines.tts.base import TTSEngine
from dragoman.errors import ConfigError

ASR_BACKENDS: dict[str, str] = {
    "whisper-ct2": "dragoman.engines.asr.whisper_ct2:create",
    "moonshine": "dragoman.engines.asr.moonshine_ort:create",
    "openai-transcriptions": "dragoman.engines.asr.openai_transcriptions:create",
}

MT_BACKENDS: dict[str, str] = {
    "qwen-torch": "dragoman.engines.mt.qwen_torch:create",
    "qwen-llama": "dragoman.engines.mt.qwen_llama:create",
    "ct2-seq2seq": "dragoman.engines.mt.ct2_seq2seq:create",
    "chat-translation": "dragoman.engines.mt.chat_translation:create",
    "mt-protocol": "dragoman.engines.mt.mt_protocol_remote:create",
}

TTS_BACKENDS: dict[str, str] = {
    "hibari": "dragoman.engines.tts.hibari:create",
    "piper": "dragoman.engines.tts.piper:create",
    "kokoro": "dragoman.engines.tts.kokoro:create",
    "espeak-ng": "dragoman.engines.tts.espeak:create",
}

LLM_BACKENDS: dict[str, str] = {
    "llama-cpp": "dragoman.engines.llm.llama_cpp:create",
    "chat-completions": "dragoman.engines.llm.chat_completions:create",
    "responses": "dragoman.engines.llm.responses:create",
}


#: Packages that only optional backends need, and the extra of pyproject.toml that installs each.
OPTIONAL_EXTRAS: dict[str, str] = {"torch": "torch"}


def asr_backends() -> list[str]:
    return sorted(ASR_BACKENDS)


def mt_backends() -> list[str]:
    return sorted(MT_BACKENDS)


def llm_backends() -> list[str]:
    return sorted(LLM_BACKENDS)


def tts_backends() -> list[str]:
    return sorted(TTS_BACKENDS)


def _factory(kind: str, name: str, table: Mapping[str, str]) -> Callable[..., Any]:
    target = table.get(name)
    if target is None:
        raise ConfigError(f"unknown {kind} backend {name!r}; known backends: {', '.join(sorted(table))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        # A backend whose libraries are not installed; the others still work.
        extra = OPTIONAL_EXTRAS.get(exc.name or "")
        hint = f" (pip install 'dragoman[{extra}]')" if extra else ""
        raise ConfigError(f"{kind} backend {name!r} cannot be loaded: {exc}{hint}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"{kind} backend {name!r}: {target} is not a factory")
    return cast(Callable[..., Any], factory)


def create_asr_engine(
    settings: ASRSettings, cache_dir: Path, scoped: Mapping[str, Mapping[str, str]] | None = None
) -> ASREngine:
    """Build the ASR backend named by `settings.backend`, or, with `settings.base_url`, the
    remote server that transcribes for it; with the routes of `settings.routes` and, for the
    steps of a service, of `scoped[service]` (`interpreter.asr_routes`), each backend loaded once."""
    backend = "openai-transcriptions" if settings.base_url else settings.backend
    engine = _factory("ASR", backend, ASR_BACKENDS)(settings, cache_dir)
    if not isinstance(engine, ASREngine):
        raise ConfigError(
            f"ASR backend {settings.backend!r} built a {type(engine).__name__}, not an ASREngine"
        )
    scoped = {scope: routes for scope, routes in (scoped or {}).items() if routes}
    if (not settings.routes and not scoped) or settings.base_url:
        return engine
    from dragoman.engines.asr.by_language import LanguageRoutedASR

    loaded: dict[str, ASREngine] = {}

    def route_engine(route: str) -> ASREngine:
        if route not in loaded:
            name, _, model = route.partition(":")
            # Without a model named, the backend's factory serves its own packaged default.
            update = {"backend": name, "routes": {}} | ({"model": model} if model else {})
            loaded[route] = create_asr_engine(settings.model_copy(update=update), cache_dir)
        return loaded[route]

    try:
        return LanguageRoutedASR(
            engine,
            {language: route_engine(route) for language, route in settings.routes.items()},
            {
                scope: {language: route_engine(route) for language, route in routes.items()}
                for scope, routes in scoped.items()
            },
        )
    except BaseException:
        for unused in (*loaded.values(), engine):
            unused.close()
        raise


def create_mt_engine(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """Build the MT backend named by `settings.backend`, or the remote ones that translate for
    it: `settings.nodes` (MT protocol v1 nodes), else `settings.base_url` (chat completions)."""
    backend = settings.backend
    if settings.nodes:
        backend = "mt-protocol"
    elif settings.base_url:
        backend = "chat-translation"
    engine = _factory("MT", backend, MT_BACKENDS)(settings, cache_dir)
    if not isinstance(engine, MTEngine):
        raise ConfigError(f"MT backend {settings.backend!r} built a {type(engine).__name__}, not an MTEngine")
    return engine


def create_llm_engine(settings: LLMSettings, cache_dir: Path) -> LLMEngine:
    """Build the LLM backend named by `settings.backend`."""
    engine = _factory("LLM", settings.backend, LLM_BACKENDS)(settings, cache_dir)
    if not isinstance(engine, LLMEngine):
        raise ConfigError(
            f"LLM backend {settings.backend!r} built a {type(engine).__name__}, not an LLMEngine"
        )
    return engine


def create_tts_engine(settings: TTSSettings, cache_dir: Path, backend: str) -> TTSEngine:
    """Build the TTS backend named `backend` (one of `settings.backends`; several serve at once),
    or, with `settings.base_url`, the remote server that speaks for all of them."""
    if settings.base_url:
        from dragoman.engines.tts.openai_speech import OpenAISpeech

        return OpenAISpeech(settings)
    engine = _factory("TTS", backend, TTS_BACKENDS)(settings, cache_dir)
    if not isinstance(engine, TTSEngine):
        raise ConfigError(f"TTS backend {backend!r} built a {type(engine).__name__}, not a TTSEngine")
    return engine
