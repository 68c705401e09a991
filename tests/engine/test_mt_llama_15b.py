"""Qwen2.5-Coder-1.5B on llama.cpp (qwen-llama): the default MT engine where the CPU is fast enough.

`make install` installs the 1.5B; the test is skipped only on an older install without it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.config import MTSettings
from dragoman.cpu import cpu_info
from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.engines.mt.model_choice import SPEED_MEMORY_FILE, SpeedMemory, choose_model
from dragoman.engines.mt.presets import DEFAULT_MODEL, QUALITY_MODEL, model_installed
from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine, create
from dragoman.engines.mt.target_script import QUOTE_MARKS
from dragoman.tools import eval_set

pytestmark = pytest.mark.engine

FLORES = eval_set.eval_path(eval_set.FLORES)


def flores_line(line: int, target: str = "deu_Latn") -> tuple[str, str]:
    with FLORES.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if int(row["line"]) == line:
                return row["eng_Latn"], row[target]
    raise LookupError(line)


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[QwenLlamaMTEngine]:
    if not model_installed(QUALITY_MODEL, cache_dir):
        pytest.skip("the 1.5B model is not installed (make install)")
    built = create(MTSettings(preset="low_latency"), cache_dir)
    assert isinstance(built, QwenLlamaMTEngine)
    yield built
    built.close()


def test_low_latency_is_the_1_5b_on_llama_cpp(engine: QwenLlamaMTEngine) -> None:
    assert engine.name == QUALITY_MODEL
    assert engine.describe().backend == "qwen-llama"
    assert engine.num_layers == 28  # the 0.5B has 24
    assert engine.directions() == ["de-en", "en-de", "en-it", "en-zh", "it-en", "zh-en"]
    assert engine.chosen_preset is None  # named, not chosen by `auto`


def test_it_translates_a_flores_line_into_german(engine: QwenLlamaMTEngine) -> None:
    # FLORES devtest line 1: „Wir haben jetzt 4 Monate alte Mäuse, die ... keinen Diabetes mehr ...“
    source, reference = flores_line(1)
    assert "Mäuse" in reference
    final = engine.draft(MTRequest("en", "de", source.split(), mode=DraftMode.FINAL, cache_key="t"))
    text = engine.decode(final.token_ids)
    assert final.finished, text
    for word in ("Wir", "Mäuse", "Monat", "diabet"):
        assert word in text, text
    assert "mice" not in text and "month" not in text, text  # German, not an English copy


def test_a_streaming_draft_aligns_its_tokens_to_the_source(engine: QwenLlamaMTEngine) -> None:
    sentence = "The committee said on Monday that the new rules will take effect next year"
    words = sentence.split(" ")
    draft = engine.draft(MTRequest("en", "de", words, max_new_tokens=10, cache_key="s"))
    assert draft.attention is not None and draft.attention.shape == (len(draft.token_ids), len(words))
    peaks = draft.attention.argmax(axis=1)
    assert peaks[0] <= 1 and peaks[-1] > peaks[0], peaks  # starts at the start, moves forward
    engine.forget("s")


def test_a_translation_opens_no_quote_its_source_does_not(engine: QwenLlamaMTEngine) -> None:
    # FLORES devtest line 18's first words: the 1.5B drafted '"Von 1960' here, and every later
    # draft kept the quote it opened (engines/mt/target_script.py).
    words = ["Throughout", "1960s,", "Brzezinski", "worked", "for", "John", "F.", "Kennedy"]
    for mode in (DraftMode.PARTIAL, DraftMode.FINAL):
        drafted = engine.draft(MTRequest("en", "de", words, mode=mode, max_new_tokens=6, cache_key=None))
        text = engine.decode(drafted.token_ids)
        assert text.strip() and text.lstrip()[0] not in QUOTE_MARKS, (mode, text)
        assert "196" in text, (mode, text)  # a translation, not an empty or cut one


#: A lowercase Latin word inside Chinese: an English one left untranslated.
LOWERCASE_WORD = re.compile(r"(?<![A-Za-z])[a-z]{2,}")


@pytest.mark.parametrize("line", [12, 32, 67])
def test_a_chinese_translation_leaves_no_english_word_untranslated(
    engine: QwenLlamaMTEngine, line: int
) -> None:
    # Left to itself the 1.5B kept one English word of each of these FLORES lines, alone and
    # final, on the AMD EPYC (Zen 5): "一种抗体 cocktail", "而不是 chick的绒毛", "中生代 batsmen"
    # (engines/mt/target_script.py). Its capitalised names (ZMapp, Sachin Tendulkar) may stay.
    source, _ = flores_line(line, "zho_Hans")
    final = engine.draft(MTRequest("en", "zh", source.split(), mode=DraftMode.FINAL, cache_key=None))
    text = engine.decode(final.token_ids)
    assert final.finished and re.search("[\u4e00-\u9fff]{8}", text), text
    assert not LOWERCASE_WORD.search(text), text


def test_auto_chooses_the_model_its_measured_speed_calls_for(
    engine: QwenLlamaMTEngine, cache_dir: Path
) -> None:
    sample = engine.measure_speed()
    assert sample.prefill_tok_s > 0 and sample.decode_tok_s > 0 and sample.threads == engine.threads
    chosen = create(MTSettings(), cache_dir)
    try:
        # `auto` measured the 1.5B itself, took the best of that and the speed remembered for
        # this CPU, kernels and threads, and remembered the result: the rule applied to that
        # sample must give the model that was chosen.
        memory = SpeedMemory(cache_dir.expanduser() / SPEED_MEMORY_FILE)
        key = SpeedMemory.key(QUALITY_MODEL, f"{cpu_info().describe()}, {engine.kernels}", engine.threads)
        decided_on = memory.recall(key)
        assert decided_on is not None and decided_on.decode_tok_s > 0
        expected = choose_model(decided_on, quality_installed=True)
        assert chosen.chosen_preset == ("low_latency" if expected.quality else "fast"), expected.reason
        assert chosen.name == (QUALITY_MODEL if expected.quality else DEFAULT_MODEL), expected.reason
    finally:
        chosen.close()
