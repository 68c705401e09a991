"""Command-line flags become settings, over the environment and the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.cli import _overrides, _parser
from dragoman.config import Settings, load_settings
from dragoman.tools.models import models_report
from dragoman.weights import ModelStatus


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
            "--mt-stale-budget",
            "12",
            "--asr-chinese-script",
            "traditional",
            "--interpreter-voice",
            "de=kokoro-de-nicola",
            "--interpreter-voice",
            "it=espeak-it",
        ]
    )
    assert settings.interpreter.voices == {"de": "kokoro-de-nicola", "it": "espeak-it"}
    assert settings.port == 9100  # the flag wins over the environment
    assert settings.asr.model == "whisper-tiny.en"  # the environment wins over the default
    assert settings.mt.preset == "fastest"
    assert settings.mt.compute_type == "bfloat16"
    assert settings.mt.stale_budget == 12
    assert settings.asr.chinese_script == "traditional"
    assert settings.transcription.chunk_seconds == 1.5


def test_config_file_is_below_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "dragoman.toml"
    config.write_text('port = 7000\nlog_level = "debug"\n[asr]\nmax_batch = 4\n')
    monkeypatch.setenv("DRAGOMAN_PORT", "7100")
    settings = settings_from(["serve", "--config", str(config)])
    assert (settings.port, settings.log_level, settings.asr.max_batch) == (7100, "debug", 4)


def test_a_flag_with_choices_refuses_another(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--asr-chinese-script", "cantonese"])
    assert "invalid choice" in capsys.readouterr().err


def test_help_shows_plain_metavars() -> None:
    subparsers = _parser()._subparsers
    assert subparsers is not None
    commands = subparsers._group_actions[0].choices
    assert isinstance(commands, dict)
    help_text = commands["serve"].format_help()
    assert "--asr-model MODEL" in help_text and "MT.PRESET" not in help_text


def _status(name: str, *, installed: bool, verified: bool, optional: bool = False) -> ModelStatus:
    return ModelStatus(
        name,
        "llm",
        "a model",
        installed,
        verified,
        Path("/cache") / name,
        1_000_000,
        optional=optional,
        install_hint="make install-1.5b",
    )


@pytest.mark.parametrize("action", ["install", "verify"])
def test_an_absent_optional_model_is_no_failure(action: str) -> None:
    report, failed = models_report(
        [
            _status("default", installed=True, verified=True),
            _status("big", installed=False, verified=False, optional=True),
        ],
        action,
    )
    assert not failed
    assert "missing (optional: make install-1.5b)" in report


@pytest.mark.parametrize(
    "broken",
    [
        _status("default", installed=False, verified=False),  # a default model missing
        _status("big", installed=True, verified=False, optional=True),  # an optional one corrupt
    ],
)
def test_a_missing_default_or_corrupt_model_fails(broken: ModelStatus) -> None:
    ok = _status("other", installed=True, verified=True)
    assert models_report([ok, broken], "verify")[1]
    assert not models_report([ok, broken], "list")[1]  # listing reports, it never fails


def test_calibrate_takes_several_data_files() -> None:
    args = _parser().parse_args(["mt", "calibrate", "--direction", "en-de", "--data", "a.tsv", "b.tsv"])
    assert args.data == [Path("a.tsv"), Path("b.tsv")]
