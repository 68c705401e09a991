"""`auto`'s shared pick (`llama_speed.pick_by_speed`), as MT's and the LLM's factories use it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dragoman.config import MTSettings
from dragoman.engines.llama_speed import SpeedMemory, SpeedSample, pick_by_speed, speed_key
from dragoman.engines.mt import qwen_llama
from dragoman.engines.mt.presets import DEFAULT_MODEL, QUALITY_MODEL
from dragoman.errors import EngineFailure

FAST = SpeedSample(prefill_tok_s=200.0, decode_tok_s=40.0, threads=2, seconds=0.5)
SLOW = SpeedSample(prefill_tok_s=5.0, decode_tok_s=1.0, threads=2, seconds=0.5)


class StandIn:
    """What the pick uses of an engine: its kernels, speed and close."""

    def __init__(self, model: str, speed: SpeedSample | None) -> None:
        self.model = model
        self.kernels = "haswell"
        self.speed = speed
        self.closed = False
        self.chosen_preset = ""
        self.threads = 2
        self.name = model

    def measure_speed(self) -> SpeedSample:
        if self.speed is None:
            raise EngineFailure("the probe failed")
        return self.speed

    def close(self) -> None:
        self.closed = True


class Loader:
    def __init__(self, speed: SpeedSample | None) -> None:
        self.speed = speed
        self.built: list[StandIn] = []

    def __call__(self, model: str) -> StandIn:
        engine = StandIn(model, self.speed if model == "big" else None)
        self.built.append(engine)
        return engine


def pick(loader: Loader, tmp_path: Path, installed: bool = True) -> Any:
    return pick_by_speed(
        "big",
        installed=installed,
        load=loader,
        memory_path=tmp_path / "speed.json",
        choose=lambda sample: "big" if sample is not None and sample.decode_tok_s >= 10 else "small",
        model_of=lambda choice: choice,
    )


def test_a_fast_model_is_kept_and_remembered(tmp_path: Path) -> None:
    loader = Loader(FAST)
    got = pick(loader, tmp_path)
    assert got.engine.model == "big" and not got.engine.closed
    assert got.measured == FAST and got.sample == FAST
    assert [e.model for e in loader.built] == ["big"]  # loaded once, not again
    assert SpeedMemory(tmp_path / "speed.json").recall(speed_key("big", "haswell", 2)) is not None


def test_a_slow_model_is_let_go_for_the_small_one(tmp_path: Path) -> None:
    loader = Loader(SLOW)
    got = pick(loader, tmp_path)
    assert [e.model for e in loader.built] == ["big", "small"]
    assert loader.built[0].closed and got.engine is loader.built[1] and not got.engine.closed


def test_a_failed_measurement_or_a_missing_model_picks_on_nothing(tmp_path: Path) -> None:
    loader = Loader(None)
    got = pick(loader, tmp_path)
    assert got.sample is None and got.measured is None
    assert loader.built[0].closed and got.engine.model == "small"
    loader = Loader(FAST)
    got = pick(loader, tmp_path, installed=False)
    assert [e.model for e in loader.built] == ["small"]


@pytest.mark.parametrize(
    ("speed", "model", "preset"), [(FAST, QUALITY_MODEL, "low_latency"), (SLOW, DEFAULT_MODEL, "fast")]
)
def test_mt_auto_picks_through_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, speed: SpeedSample, model: str, preset: str
) -> None:
    built: list[StandIn] = []

    def create(name: str, settings: MTSettings, cache_dir: Path) -> StandIn:
        built.append(StandIn(name, speed if name == QUALITY_MODEL else None))
        return built[-1]

    monkeypatch.setattr(qwen_llama, "_create", create)
    monkeypatch.setattr(qwen_llama, "model_installed", lambda model, cache_dir: True)
    engine: Any = qwen_llama.create(MTSettings(preset="auto"), tmp_path)
    assert engine.model == model and engine.chosen_preset == preset
    assert built[0].model == QUALITY_MODEL and built[0].closed == (model != QUALITY_MODEL)
