"""The model-free parts of drafting: KV-cache reuse bookkeeping, the frontier stop, the final budget."""

from __future__ import annotations

import numpy as np
import pytest

from dragoman.engines.mt.base import final_token_budget
from dragoman.engines.mt.draft_loop import frontier_limit
from dragoman.engines.torch_lm.kv_cache import CacheEntry, LastDraft, PromptCaches, common_prefix, opening


class FakeKV:
    """What `PromptCaches` asks of a transformers cache: its length, and cropping it."""

    def __init__(self, length: int) -> None:
        self.length = length

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, by: int) -> None:
        assert by < 0
        self.length += by


@pytest.fixture
def caches(monkeypatch: pytest.MonkeyPatch) -> PromptCaches:
    built = PromptCaches(model_config=None, max_entries=2)
    monkeypatch.setattr(built, "new_kv", lambda: FakeKV(0))
    return built


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0


def entry(ids: list[int], held: int, target: list[int], source_start: int = 1) -> CacheEntry:
    return CacheEntry(ids, FakeKV(held), LastDraft(opening(ids, source_start), target))


def test_reuse_keeps_the_common_prefix_and_guesses_the_draft(caches: PromptCaches) -> None:
    # Prompt 1 | source 2 3 | target 7 (prefix) then 8 9 drafted; the KV holds 4 tokens.
    caches.store("utt", entry([1, 2, 3, 7], 4, target=[7, 8, 9]))
    kv, keep, guess = caches.reuse("utt", [1, 2, 3, 7, 8], source_start=1, target_start=3)
    assert keep == 4 and kv.get_seq_length() == 4
    assert guess == [9]  # the old draft beyond the new target prefix 7 8
    # Taken out while in use: a second reuse starts cold.
    assert caches.reuse("utt", [1, 2], source_start=1, target_start=1)[1] == 0


def test_reuse_always_feeds_the_last_prompt_token(caches: PromptCaches) -> None:
    caches.store("utt", entry([1, 2, 3], 3, target=[3]))
    kv, keep, guess = caches.reuse("utt", [1, 2, 3], source_start=1, target_start=2)
    assert keep == 2 and kv.get_seq_length() == 2 and guess == []


def test_a_diverged_prefix_or_a_stale_cache_is_not_reused(caches: PromptCaches) -> None:
    caches.store("a", entry([1, 2, 3, 4], 4, target=[4, 5]))
    _kv, keep, guess = caches.reuse("a", [1, 9, 9, 6], source_start=1, target_start=3)
    assert keep == 1 and guess == []  # the target prefix changed: no guess
    caches.store("b", entry([1, 2, 3], 5, target=[]))  # kv out of step with ids
    assert caches.reuse("b", [1, 2, 3, 4], source_start=1, target_start=3)[1] == 0
    assert caches.reuse(None, [1, 2], source_start=1, target_start=1)[1] == 0


def test_the_next_utterance_gets_no_guess_from_the_one_before(caches: PromptCaches) -> None:
    # Utterance 1: head 1 | source 2 3 | drafted 7 8. Utterance 2 keeps it all as its history
    # (head 1 2 3 7 8 | source 4): the same target prefix (none), another first source token.
    caches.store("utt", entry([1, 2, 3, 7, 8], 5, target=[7, 8]))
    _kv, keep, guess = caches.reuse("utt", [1, 2, 3, 7, 8, 4], source_start=5, target_start=6)
    assert keep == 5 and guess == []
    # The same utterance, its source grown: the draft before is the guess.
    caches.store("utt", entry([1, 2, 3, 7, 8], 5, target=[7, 8]))
    _kv, keep, guess = caches.reuse("utt", [1, 2, 3, 4], source_start=1, target_start=4)
    assert keep == 3 and guess == [7, 8]


def test_least_recently_used_entries_are_dropped(caches: PromptCaches) -> None:
    for key in ("a", "b", "c"):
        caches.store(key, entry([1, 2], 2, target=[]))
    assert caches.reuse("a", [1, 2, 3], source_start=1, target_start=2)[1] == 0
    assert caches.reuse("c", [1, 2, 3], source_start=1, target_start=2)[1] == 2
    caches.drop("b")
    assert caches.reuse("b", [1, 2, 3], source_start=1, target_start=2)[1] == 0
    caches.store(None, entry([1], 1, target=[]))  # no key: nothing kept


def _rows(*peaks: int, words: int = 5) -> list[np.ndarray]:
    rows = []
    for peak in peaks:
        row = np.zeros(words, dtype=np.float32)
        if peak >= 0:
            row[peak] = 1.0
        rows.append(row)
    return rows


def test_frontier_limit_stops_past_the_first_row_beyond_the_frontier() -> None:
    rows = _rows(0, 1, 3, 1)
    assert frontier_limit(rows, 0, frontier_word=3, past=1, limit=10) == 4
    assert frontier_limit(rows, 0, frontier_word=4, past=1, limit=10) == 10
    # A row without attention mass counts as beyond the frontier, as in the policy.
    assert frontier_limit(_rows(0, -1), 0, frontier_word=3, past=0, limit=10) == 2
    # Rows before `first` were checked on an earlier pass.
    assert frontier_limit(rows, 3, frontier_word=3, past=0, limit=10) == 10


def test_final_budget_is_generous_per_word_and_per_token() -> None:
    assert final_token_budget(10, 12) == 72
    # Digit strings: many tokens per word, so the token term decides, up to 256.
    assert final_token_budget(5, 80) == 176
    assert final_token_budget(5, 1000) == 256
    assert final_token_budget(1000, 10) == 1024


def test_every_backend_declares_its_capabilities() -> None:
    from dragoman.engines.mt.base import MTCapabilities
    from dragoman.engines.mt.ct2_seq2seq import CT2MTEngine
    from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine

    qwen, ct2 = QwenTorchMTEngine.capabilities, CT2MTEngine.capabilities
    assert isinstance(qwen, MTCapabilities) and isinstance(ct2, MTCapabilities)
    assert qwen.attention and qwen.kv_reuse and qwen.prompt_context and qwen.frontier_stop
    # No prompt and no cache: context, history and cache keys are ignored.
    assert ct2.attention and not (ct2.kv_reuse or ct2.prompt_context or ct2.frontier_stop)
