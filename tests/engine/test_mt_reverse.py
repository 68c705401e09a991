"""The reverse directions de-en, it-en and zh-en on the interpreter's quality model (the 1.5B
on llama.cpp): their calibrated heads load and align, and a short real sentence of each language
comes out in English.

The sentences are Tatoeba lines from the ends of the excerpts, past what `dragoman mt calibrate`
read for these heads; a Chinese source goes in one character a word, as the speech front sends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.engines.mt.head_selection import source_words
from dragoman.engines.mt.presets import QUALITY_MODEL, model_installed
from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine, create

pytestmark = pytest.mark.engine

#: (direction, source, English words the translation must hold: any of each tuple).
CASES = [
    ("de-en", "Am Montag haben wir einen Französischtest.", (("monday",), ("french",), ("test",))),
    ("it-en", "I bambini stanno già dormendo?", (("children", "kids"), ("sleep", "asleep"))),
    ("zh-en", "早餐时间在七点到九点。", (("breakfast",), ("seven", "7"), ("nine", "9"))),
]


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[QwenLlamaMTEngine]:
    if not model_installed(QUALITY_MODEL, cache_dir):
        pytest.skip("the 1.5B model is not installed (make install)")
    built = create(MTSettings(preset="low_latency"), cache_dir)
    assert isinstance(built, QwenLlamaMTEngine)
    yield built
    built.close()


def test_the_reverse_directions_ship_calibrated_heads(engine: QwenLlamaMTEngine) -> None:
    assert {"de-en", "it-en", "zh-en"} <= set(engine.directions())
    for direction, _source, _words in CASES:
        found = mt_heads.find(engine.name, direction, [mt_heads.packaged_dir()])
        assert found is not None and found.direction == direction
        assert found.calibration["sentences"] >= 20 and found.calibration["anchors"] > 0


@pytest.mark.parametrize(("direction", "source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_short_sentence_comes_out_in_english(
    engine: QwenLlamaMTEngine, direction: str, source: str, expected: tuple[tuple[str, ...], ...]
) -> None:
    source_lang, target_lang = direction.split("-")
    words = source_words(source, source_lang)
    # A streaming draft reads the heads: one row of attention over the source words per token.
    partial = engine.draft(MTRequest(source_lang, target_lang, words, max_new_tokens=4, cache_key=direction))
    assert partial.attention is not None
    assert partial.attention.shape == (len(partial.token_ids), len(words))
    assert np.isfinite(partial.attention).all() and partial.attention.sum() > 0
    final = engine.draft(
        MTRequest(source_lang, target_lang, words, mode=DraftMode.FINAL, cache_key=direction)
    )
    text = engine.decode(final.token_ids)
    assert final.finished, text
    lowered = text.lower()
    for options in expected:
        assert any(option in lowered for option in options), (options, text)
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in text), text
