"""`auto`: the MT model chosen from the 1.5B's measured speed (a pure function of the numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt.model_choice import (
    MIN_DECODE_TOK_S,
    MIN_PREFILL_TOK_S,
    SpeedMemory,
    SpeedSample,
    best_of,
    choose_model,
    measure,
)
from dragoman.engines.mt.presets import (
    AUTO_PRESET,
    DEFAULT_MODEL,
    PRESETS,
    QUALITY_MODEL,
    auto_preset_for,
    preset_model,
)
from dragoman.errors import ConfigError


def _sample(prefill: float, decode: float, threads: int = 2) -> SpeedSample:
    return SpeedSample(prefill_tok_s=prefill, decode_tok_s=decode, threads=threads, seconds=1.0)


def test_a_fast_enough_cpu_gets_the_1_5b_and_says_why() -> None:
    choice = choose_model(_sample(52.0, 13.4), quality_installed=True)
    assert choice.quality and choice.pick == "quality"
    assert "13.4 tok/s" in choice.reason and "52 tok/s" in choice.reason and "2 threads" in choice.reason


@pytest.mark.parametrize(
    ("prefill", "decode"),
    [
        (MIN_PREFILL_TOK_S * 2, MIN_DECODE_TOK_S * 0.9),  # decodes too slowly
        (MIN_PREFILL_TOK_S * 0.9, MIN_DECODE_TOK_S * 2),  # prefills too slowly
        (3.0, 0.8),
    ],
)
def test_a_slow_cpu_gets_the_0_5b(prefill: float, decode: float) -> None:
    choice = choose_model(_sample(prefill, decode, threads=1), quality_installed=True)
    assert not choice.quality and choice.pick == "fast"
    assert "too slow" in choice.reason and "on 1 thread:" in choice.reason


def test_the_thresholds_themselves_choose_the_1_5b() -> None:
    assert choose_model(_sample(MIN_PREFILL_TOK_S, MIN_DECODE_TOK_S), quality_installed=True).quality


def test_without_the_1_5b_or_its_numbers_the_0_5b() -> None:
    missing = choose_model(_sample(100.0, 50.0), quality_installed=False)
    assert not missing.quality and "not installed" in missing.reason
    unmeasured = choose_model(None, quality_installed=True)
    assert not unmeasured.quality and "could not be measured" in unmeasured.reason


class _FakeContext:
    """Stands in for TappedContext's sequence: counts what the probe feeds, no model."""

    threads = 3

    def __init__(self) -> None:
        self.fed: list[int] = []
        self.truncated: list[int] = []

    def eval(self, tokens: list[int], out_from: int, cols: slice | None) -> tuple[list[int], object]:
        self.fed.extend(tokens)
        return [7] * (len(tokens) - out_from), None

    def truncate(self, length: int) -> None:
        self.truncated.append(length)


def test_measure_feeds_a_bounded_probe_and_leaves_the_context_empty() -> None:
    ctx = _FakeContext()
    sample = measure(ctx, list(range(100)))
    assert sample.threads == 3 and sample.prefill_tok_s > 0 and sample.decode_tok_s > 0
    # Two rounds of at most 24 prompt tokens and 6 decode steps each.
    assert len(ctx.fed) == 2 * (24 + 6)
    assert ctx.truncated[-1] == 0
    with pytest.raises(ValueError):
        measure(ctx, [1])


def test_presets_auto_fast_and_low_latency() -> None:
    assert MTSettings().preset == AUTO_PRESET and MTSettings().backend == "qwen-llama"
    assert AUTO_PRESET not in PRESETS
    assert PRESETS["low_latency"].model == QUALITY_MODEL
    assert PRESETS["fast"].model == DEFAULT_MODEL
    # `fast` is the 0.5B with the low_latency policy, without history (it costs the 0.5B BLEU).
    fast, low = dict(PRESETS["fast"].policy), dict(PRESETS["low_latency"].policy)
    assert fast.pop("history_pairs") == 0 and low.pop("history_pairs") == 2
    assert fast == low
    assert preset_model(AUTO_PRESET) == DEFAULT_MODEL  # before (or without) the measurement
    assert preset_model("1.5b_quality") == QUALITY_MODEL
    assert auto_preset_for(DEFAULT_MODEL) == "fast"
    assert auto_preset_for(QUALITY_MODEL) == "low_latency"
    assert auto_preset_for("my-own-model") == "low_latency"
    with pytest.raises(ConfigError, match="auto"):
        preset_model("nonesuch")


def test_a_busy_start_is_judged_on_the_best_speed_this_cpu_has_shown(tmp_path: Path) -> None:
    memory = SpeedMemory(tmp_path / "models" / "mt-speed.json")
    key = SpeedMemory.key("m", "Some CPU, 2 cores, AVX2", 2)
    assert memory.recall(key) is None
    quiet = _sample(MIN_PREFILL_TOK_S * 2, MIN_DECODE_TOK_S * 1.5)
    memory.remember(key, best_of(quiet, memory.recall(key)))
    busy = _sample(MIN_PREFILL_TOK_S * 0.7, MIN_DECODE_TOK_S * 0.8)
    assert not choose_model(busy, quality_installed=True).quality, "alone, the busy sample picks the 0.5B"
    used = best_of(busy, memory.recall(key))
    assert (used.prefill_tok_s, used.decode_tok_s) == (quiet.prefill_tok_s, quiet.decode_tok_s)
    assert choose_model(used, quality_installed=True).quality
    memory.remember(key, used)
    assert memory.recall(key) == SpeedSample(quiet.prefill_tok_s, quiet.decode_tok_s, 2, 0.0)
    assert memory.recall(SpeedMemory.key("m", "Some CPU, 2 cores, AVX2", 1)) is None, "threads are kept apart"


def test_other_threads_or_a_damaged_memory_are_not_used(tmp_path: Path) -> None:
    fast_on_four = _sample(100.0, 30.0, threads=4)
    slow = _sample(10.0, 3.0, threads=2)
    assert best_of(slow, fast_on_four) == slow
    path = tmp_path / "mt-speed.json"
    path.write_text("{not json", encoding="utf-8")
    assert SpeedMemory(path).recall("k") is None
    path.write_text('{"k": {"prefill_tok_s": "x"}}', encoding="utf-8")
    assert SpeedMemory(path).recall("k") is None
    SpeedMemory(path).remember("k", slow)
    assert SpeedMemory(path).recall("k") == SpeedSample(10.0, 3.0, 2, 0.0)
