"""Server settings: defaults < config file (TOML) < environment (DRAGOMAN_*) < command-line flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

Service = Literal["transcription", "mt"]
SERVICES: tuple[Service, ...] = ("transcription", "mt")


def default_cache_dir() -> Path:
    """`DRAGOMAN_CACHE_DIR`, else ~/.cache/dragoman: the same folder whoever asks."""
    configured = os.environ.get("DRAGOMAN_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "dragoman"


class ASRSettings(BaseModel):
    #: Backend name (see dragoman.engines.registry).
    backend: str = "whisper-ct2"
    #: A packaged model name (`dragoman models`) or a path to the user's own weights,
    #: e.g. a CTranslate2 Whisper small or large-v3 folder.
    model: str = "whisper-base"
    compute_type: str = "int8"
    device: str = "cpu"
    #: Threads per engine call (0: the server gives each engine an equal share of the cores).
    threads: int = Field(default=0, ge=0)
    beam_size: int = Field(default=1, ge=1)
    #: Most step requests one engine call may carry.
    max_batch: int = Field(default=16, ge=1)


class TranscriptionSettings(BaseModel):
    chunk_seconds: float = Field(default=2.0, gt=0)
    unfixed_chunks: int = Field(default=2, ge=0)
    unfixed_tokens: int = Field(default=5, ge=0)
    #: MAX_ITEM_SECONDS; the engine's max_audio_seconds applies when smaller.
    max_item_seconds: float = Field(default=300.0, gt=0)


class MTSettings(BaseModel):
    backend: str = "qwen-torch"
    preset: str = "low_latency"
    max_sessions: int = Field(default=4, ge=1)
    max_utterance_words: int = Field(default=60, ge=1)
    #: A packaged model name or a path to the user's own weights; None takes the preset's.
    #: For `ct2-seq2seq`: a CTranslate2 Marian/OPUS-MT or NLLB folder.
    model: str | None = None
    #: Directions a seq2seq model serves ("en-de"); the qwen-torch backend reads them from heads files.
    directions: list[str] = Field(default_factory=list)
    device: str = "cpu"
    #: auto: int8 where the CPU has VNNI or AMX and measures it faster, float32 elsewhere
    #: (qwen-torch; see engines/torch_lm/load); CTranslate2's own choice for ct2-seq2seq.
    compute_type: str = "auto"
    #: Threads per engine call (0: the server gives each engine an equal share of the cores).
    threads: int = Field(default=0, ge=0)
    #: qwen-torch: verify the previous draft's tokens in the prompt pass instead of decoding them again.
    speculate: bool = True
    #: Extra folder of alignment-heads files, searched before the packaged ones.
    heads_dir: Path | None = None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAGOMAN_", env_nested_delimiter="__", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["auto", "json", "console"] = "auto"
    #: Where assembled models live; reused across clones and CI runs.
    cache_dir: Path = Field(default_factory=default_cache_dir)
    #: Which services to load at start-up.
    services: list[Service] = Field(default_factory=lambda: list(SERVICES))
    asr: ASRSettings = Field(default_factory=ASRSettings)
    transcription: TranscriptionSettings = Field(default_factory=TranscriptionSettings)
    mt: MTSettings = Field(default_factory=MTSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if _CONFIG_FILE is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=_CONFIG_FILE))
        return tuple(sources)


_CONFIG_FILE: Path | None = None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; `overrides` (from flags) win over the environment and the file.

    Nested overrides use dotted keys: {"asr.model": "/models/whisper-small"}.
    """
    global _CONFIG_FILE
    _CONFIG_FILE = config_file
    try:
        nested: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            target = nested
            *parents, leaf = key.split(".")
            for part in parents:
                target = target.setdefault(part, {})
            target[leaf] = value
        base = Settings()
        if not nested:
            return base
        merged = _deep_merge(base.model_dump(), nested)
        return Settings.model_validate(merged)
    finally:
        _CONFIG_FILE = None


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
