"""Command-line flags become settings, over the environment and the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.cli import _overrides, _parser
from dragoman.config import Settings, load_settings


def settings_from(argv: list[str]) -> Settings:
    args = _parser().parse_args(argv)
    return load_settings(args.config, **_overrides(args))


def test_flags_set_nested_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_ASR__MODEL", "whisper-tiny.en")
    monkeypatch.setenv("DRAGOMAN_PORT", "9001")
    settings = settings_from(
        [
            "serve",
            "--port",
            "9100",
            "--preset",
            "fastest",
            "--chunk-seconds",
            "1.5",
            "--mt-compute-type",
            "bfloat16",
        ]
    )
    assert settings.port == 9100  # the flag wins over the environment
    assert settings.asr.model == "whisper-tiny.en"  # the environment wins over the default
    assert settings.mt.preset == "fastest"
    assert settings.mt.compute_type == "bfloat16"
    assert settings.transcription.chunk_seconds == 1.5


def test_config_file_is_below_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "dragoman.toml"
    config.write_text('port = 7000\nlog_level = "debug"\n[asr]\nmax_batch = 4\n')
    monkeypatch.setenv("DRAGOMAN_PORT", "7100")
    settings = settings_from(["serve", "--config", str(config)])
    assert (settings.port, settings.log_level, settings.asr.max_batch) == (7100, "debug", 4)


def test_help_shows_plain_metavars() -> None:
    help_text = _parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    assert "--asr-model MODEL" in help_text and "MT.PRESET" not in help_text
