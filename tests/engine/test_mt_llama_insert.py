"""New source words inserted before the kept header and target prefix (qwen-llama `stale_budget`).

On the packaged 0.5B: the insert must put the new words where the attention tap
reads them (the KV-cache cell map follows llama.cpp's cells), compute less than
the exact update, and draft what the exact update drafts, up to the staleness of
the kept cells.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt.base import DraftMode, MTDraft, MTRequest
from dragoman.engines.mt.llama_draft import MIN_SHIFTED_TOKENS
from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine, create

pytestmark = pytest.mark.engine

SENTENCE = "The committee said on Monday that the new rules will take effect early next year"
WORDS = SENTENCE.split()
PREFIX = "Der Ausschuss sagte am Montag, dass"


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[QwenLlamaMTEngine]:
    built = create(MTSettings(backend="qwen-llama", preset="fast", stale_budget=6), cache_dir)
    assert isinstance(built, QwenLlamaMTEngine)
    yield built
    built.close()


def draft(engine: QwenLlamaMTEngine, words: int, key: str, prefix: str = PREFIX) -> MTDraft:
    return engine.draft(
        MTRequest("en", "de", WORDS[:words], target_prefix=prefix, max_new_tokens=6, cache_key=key)
    )


def exact(engine: QwenLlamaMTEngine, words: int, prefix: str = PREFIX) -> MTDraft:
    engine.clear_cache()
    return draft(engine, words, "exact", prefix)


def test_an_update_inserts_the_new_words_and_drafts_as_the_exact_pass(engine: QwenLlamaMTEngine) -> None:
    engine.clear_cache()
    first = draft(engine, 7, "utt")
    update = draft(engine, 8, "utt")
    reference = exact(engine, 8)
    assert first.extra["inserted_tokens"] == 0
    assert update.extra["inserted_tokens"] >= 1, update.extra
    # The header and the target prefix were kept: only the new word, the prompt's last
    # token and the draft were computed.
    assert update.extra["cached_tokens"] >= reference.extra["prompt_tokens"] - 1
    assert update.computed_tokens < reference.computed_tokens - MIN_SHIFTED_TOKENS
    # The new word's columns are read from the cells it went to: the attention over the
    # source agrees with the exact pass's (the kept cells miss one word, so not exactly).
    assert update.attention is not None and reference.attention is not None
    rows = min(len(update.token_ids), len(reference.token_ids), 3)
    assert update.token_ids[:rows] == reference.token_ids[:rows]
    assert update.attention.shape[1] == reference.attention.shape[1] == 8
    np.testing.assert_allclose(update.attention[:rows], reference.attention[:rows], atol=0.15)
    assert (update.attention[:rows].argmax(axis=1) == reference.attention[:rows].argmax(axis=1)).all()


def test_kept_cells_are_recomputed_once_the_budget_is_spent(engine: QwenLlamaMTEngine) -> None:
    engine.clear_cache()
    inserted = [draft(engine, n, "utt").extra for n in range(7, 16)]
    counts = [int(extra["inserted_tokens"]) for extra in inserted]
    stale = [int(extra["stale_tokens"]) for extra in inserted]
    assert counts[0] == 0 and all(counts[1:4]), counts
    # Budget 6: no more than six tokens ever wait under the kept cells; then a full pass.
    assert max(stale) <= 6 and 0 in counts[2:], (counts, stale)
    assert all(s == 0 for c, s in zip(counts, stale, strict=True) if c == 0)


def test_interleaved_sessions_keep_their_moved_cells(engine: QwenLlamaMTEngine) -> None:
    engine.clear_cache()
    draft(engine, 7, "a")
    draft(engine, 8, "a")  # a's cells no longer in position order
    draft(engine, 5, "b", prefix="Der Ausschuss sagte")
    back = draft(engine, 9, "a")  # a saved and restored, then one more word inserted
    engine.clear_cache()
    draft(engine, 7, "a")
    draft(engine, 8, "a")
    alone = draft(engine, 9, "a")  # the same inserts with nothing in between
    assert back.extra["inserted_tokens"] >= 1 and back.extra["stale_tokens"] == alone.extra["stale_tokens"]
    assert back.token_ids == alone.token_ids
    assert back.attention is not None and alone.attention is not None
    np.testing.assert_allclose(back.attention, alone.attention, atol=1e-4)
    # and what the exact pass drafts
    reference = exact(engine, 9)
    rows = min(len(back.token_ids), len(reference.token_ids), 3)
    assert back.token_ids[:rows] == reference.token_ids[:rows]


def test_a_final_pass_is_exact_after_inserts(engine: QwenLlamaMTEngine) -> None:
    def final(key: str) -> MTDraft:
        return engine.draft(
            MTRequest("en", "de", WORDS, target_prefix=PREFIX, mode=DraftMode.FINAL, cache_key=key)
        )

    engine.clear_cache()
    for n in range(7, 11):
        draft(engine, n, "utt")
    after_inserts = final("utt")
    engine.clear_cache()
    cold = final("utt")
    assert after_inserts.extra["inserted_tokens"] == 0 and after_inserts.extra["stale_tokens"] == 0
    assert after_inserts.token_ids == cold.token_ids


def test_no_insert_without_a_budget(cache_dir: Path) -> None:
    built = create(MTSettings(backend="qwen-llama", preset="fast"), cache_dir)
    try:
        built.draft(MTRequest("en", "de", WORDS[:7], target_prefix=PREFIX, max_new_tokens=4, cache_key="u"))
        update = built.draft(
            MTRequest("en", "de", WORDS[:8], target_prefix=PREFIX, max_new_tokens=4, cache_key="u")
        )
    finally:
        built.close()
    assert update.extra["inserted_tokens"] == 0 and update.extra["stale_tokens"] == 0
