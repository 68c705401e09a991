"""Qwen2.5-Coder-1.5B on the torch reference engine: its preset, heads and a streamed draft.

`make install` installs it; skipped only on an older install without its packages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.engines.mt.presets import QUALITY_MODEL, available_presets
from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine, create

pytestmark = pytest.mark.engine

SOURCE = [
    "The",
    "committee",
    "said",
    "on",
    "Monday",
    "that",
    "the",
    "new",
    "rules",
    "will",
    "take",
    "effect",
    "next",
    "year",
]


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[QwenTorchMTEngine]:
    if "1.5b_quality" not in available_presets(cache_dir):
        pytest.skip("the 1.5B model is not installed (make install)")
    built = create(MTSettings(preset="1.5b_quality"), cache_dir)
    assert isinstance(built, QwenTorchMTEngine)
    yield built
    built.close()


def test_the_preset_loads_the_bigger_model_with_its_own_heads(engine: QwenTorchMTEngine) -> None:
    assert engine.name == QUALITY_MODEL
    assert engine.num_layers == 28  # the 0.5B has 24
    assert engine.directions() == ["de-en", "en-de", "en-it", "en-zh", "it-en", "zh-en"]
    heads = engine.heads("en-de")
    assert heads is not None and heads.model == QUALITY_MODEL


def test_a_partial_draft_aligns_and_a_final_translates(engine: QwenTorchMTEngine) -> None:
    draft = engine.draft(MTRequest("en", "de", SOURCE, max_new_tokens=10))
    assert draft.attention is not None and draft.attention.shape == (len(draft.token_ids), len(SOURCE))
    peaks = draft.attention.argmax(axis=1)
    assert peaks[0] <= 1 and peaks[-1] > peaks[0], peaks  # starts at the start, moves forward
    final = engine.draft(MTRequest("en", "de", SOURCE, mode=DraftMode.FINAL))
    text = engine.decode(final.token_ids)
    assert final.finished and "Montag" in text, text
