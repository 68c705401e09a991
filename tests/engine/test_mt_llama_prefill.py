"""A PREFILL request puts the next utterance's prompt head in the session's KV cache (qwen-llama).

On the packaged 0.5B: after the prefill, the first draft of the next utterance computes
only its source words, the end of the user turn and its draft, not the system prompt and
history before them; and it drafts what it drafts without the prefill.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine, create

pytestmark = pytest.mark.engine

HISTORY = (
    ("The committee met on Monday.", "Der Ausschuss trat am Montag zusammen."),
    ("It discussed the new rules.", "Er erörterte die neuen Regeln."),
)
WORDS = ["They", "will", "take", "effect", "early", "next", "year"]


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> Iterator[QwenLlamaMTEngine]:
    built = create(MTSettings(backend="qwen-llama", preset="fast"), cache_dir)
    assert isinstance(built, QwenLlamaMTEngine)
    yield built
    built.close()


def request(mode: DraftMode, words: list[str], key: str) -> MTRequest:
    return MTRequest("en", "de", words, history=HISTORY, mode=mode, max_new_tokens=6, cache_key=key)


def test_the_first_draft_after_a_prefill_computes_only_its_source_and_drafts_the_same(
    engine: QwenLlamaMTEngine,
) -> None:
    engine.clear_cache()
    cold = engine.draft(request(DraftMode.PARTIAL, WORDS, "cold"))
    engine.clear_cache()
    prefilled = engine.draft(request(DraftMode.PREFILL, [], "warm"))
    assert prefilled.token_ids == [] and prefilled.finished and prefilled.computed_tokens > 60
    warm = engine.draft(request(DraftMode.PARTIAL, WORDS, "warm"))
    head = engine.build_prompt("en", "de", WORDS, "", None, HISTORY).source_start
    assert head > 60, "the system prompt, two history pairs and the instruction"
    assert warm.extra["cached_tokens"] == head, warm.extra
    assert warm.computed_tokens == cold.computed_tokens - head + cold.extra["cached_tokens"]
    assert warm.token_ids == cold.token_ids
    engine.forget("warm")
    engine.forget("cold")
