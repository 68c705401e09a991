"""`llm.model = auto`: the agent's LLM chosen from the 1.5B's measured speed.

The rule (`model_choice.choose`) is a pure function of the numbers; the factory's flow
(measure the 1.5B, remember the best speed, keep it or load the 0.5B instead, an
explicit model never measured) runs here on stand-in engines that report a given speed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from dragoman.config import LLMSettings
from dragoman.engines.llama_speed import SpeedSample
from dragoman.engines.llm import llama_cpp
from dragoman.engines.llm.model_choice import (
    CLAUSE_TOKENS,
    FAST_MODEL,
    FIRST_CLAUSE_BUDGET_S,
    QUALITY_MODEL,
    TURN_TOKENS,
    choose,
    first_clause_seconds,
)


def _at(seconds: float, threads: int = 2) -> SpeedSample:
    """A speed whose first clause takes `seconds`: prefill and decode each take half of it."""
    return SpeedSample(
        prefill_tok_s=TURN_TOKENS / (seconds / 2),
        decode_tok_s=CLAUSE_TOKENS / (seconds / 2),
        threads=threads,
        seconds=1.0,
    )


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.3, QUALITY_MODEL),
        (FIRST_CLAUSE_BUDGET_S * 0.95, QUALITY_MODEL),
        (FIRST_CLAUSE_BUDGET_S * 1.05, FAST_MODEL),
        (2.0, FAST_MODEL),
    ],
)
def test_the_model_chosen_on_either_side_of_the_budget(seconds: float, expected: str) -> None:
    sample = _at(seconds)
    assert first_clause_seconds(sample) == pytest.approx(seconds)
    choice = choose(sample, quality_installed=True)
    assert choice.model == expected
    assert f"{seconds:.2f} s" in choice.reason and "2 threads" in choice.reason


def test_without_the_1_5b_or_its_speed_the_0_5b_answers() -> None:
    assert choose(_at(0.1), quality_installed=False).model == FAST_MODEL
    assert "not installed" in choose(_at(0.1), quality_installed=False).reason
    assert choose(None, quality_installed=True).model == FAST_MODEL


class StandIn:
    """What `_create_auto` uses of an engine: its name, kernels, speed, choice and close."""

    def __init__(self, name: str, speed: SpeedSample | None) -> None:
        self.name = name
        self.kernels = "haswell"
        self.choice = ""
        self.closed = False
        self._speed = speed

    def measure_speed(self) -> SpeedSample:
        assert self._speed is not None, "only the 1.5B is measured"
        return self._speed

    def close(self) -> None:
        self.closed = True


class Factory:
    """Builds stand-ins; the 1.5B reports `speed`."""

    def __init__(self) -> None:
        self.built: list[StandIn] = []
        self.speed = _at(1.0)

    def __call__(self, model: str, settings: LLMSettings, cache_dir: Path) -> Any:
        speed = dataclasses.replace(self.speed, threads=settings.threads)
        engine = StandIn(model, speed if model == QUALITY_MODEL else None)
        self.built.append(engine)
        return engine


@pytest.fixture
def factory(monkeypatch: pytest.MonkeyPatch) -> Factory:
    made = Factory()
    monkeypatch.setattr(llama_cpp, "_create", made)
    monkeypatch.setattr(llama_cpp, "model_installed", lambda model, cache_dir: True)
    return made


@pytest.mark.parametrize(("seconds", "expected"), [(0.4, QUALITY_MODEL), (1.6, FAST_MODEL)])
def test_auto_keeps_the_1_5b_only_where_it_measures_fast_enough(
    factory: Factory, tmp_path: Path, seconds: float, expected: str
) -> None:
    factory.speed = _at(seconds)
    engine: Any = llama_cpp.create(LLMSettings(model="auto", threads=2), tmp_path)
    assert engine.name == expected
    assert "1.5B prefills" in engine.choice  # /health says why
    measured = factory.built[0]
    assert measured.name == QUALITY_MODEL
    assert measured.closed == (expected == FAST_MODEL)  # a 1.5B not kept is let go
    assert not engine.closed


def test_a_busy_start_keeps_the_best_speed_remembered(factory: Factory, tmp_path: Path) -> None:
    factory.speed = _at(0.4)
    first: Any = llama_cpp.create(LLMSettings(model="auto", threads=2), tmp_path)
    factory.speed = _at(3.0)  # the same CPU, measured while another job ran
    second: Any = llama_cpp.create(LLMSettings(model="auto", threads=2), tmp_path)
    assert first.name == second.name == QUALITY_MODEL
    # Other threads are another measurement: there a slow start takes the 0.5B.
    third: Any = llama_cpp.create(LLMSettings(model="auto", threads=1), tmp_path)
    assert third.name == FAST_MODEL


def test_a_named_model_is_never_measured(factory: Factory, tmp_path: Path) -> None:
    engine: Any = llama_cpp.create(LLMSettings(model=FAST_MODEL), tmp_path)
    assert engine.name == FAST_MODEL and engine.choice == ""
    assert [e.name for e in factory.built] == [FAST_MODEL]
