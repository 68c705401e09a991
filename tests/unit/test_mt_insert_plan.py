"""When the MT sequence cache inserts new source tokens under kept cells (no model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from dragoman.engines.mt.llama_context import TappedContext
from dragoman.engines.mt.llama_draft import MIN_SHIFTED_TOKENS, SequenceCache

HEAD = list(range(100, 130))
TAIL = [7, 8, 9, 10, 11]  # "<|im_end|>\n<|im_start|>assistant\n"


class HeldTokens:
    """Stands in for TappedContext's sequence: the tokens it holds and what was done to them."""

    def __init__(self, batch_size: int = 512) -> None:
        self.held: list[int] = []
        self.batch_size = batch_size
        self.stale_tokens = 0
        self.stale_from: int | None = None
        self.inserts: list[tuple[list[int], int]] = []

    def truncate(self, length: int) -> None:
        del self.held[length:]
        if self.stale_from is not None and length <= self.stale_from:
            self.stale_from, self.stale_tokens = None, 0

    def insert(self, tokens: Sequence[int], at: int) -> None:
        self.inserts.append((list(tokens), at))
        self.held[at:at] = list(tokens)
        self.stale_from = at + len(tokens) if self.stale_from is None else self.stale_from + len(tokens)
        self.stale_tokens += len(tokens)


def prompt(source: list[int], target: list[int]) -> tuple[list[int], int, int]:
    """Token ids, source end and target start of a prompt."""
    ids = HEAD + source + TAIL + target
    return ids, len(HEAD) + len(source), len(HEAD) + len(source) + len(TAIL)


def cache(budget: int, batch_size: int = 512) -> tuple[SequenceCache, HeldTokens]:
    ctx = HeldTokens(batch_size)
    return SequenceCache(cast(TappedContext, cast(Any, ctx)), stale_budget=budget), ctx


def reuse(cache: SequenceCache, ctx: HeldTokens, source: list[int], target: list[int]) -> int:
    ids, source_end, _target_start = prompt(source, target)
    keep = cache.reuse("utt", ids, source_end)
    assert ctx.held == ids[:keep]
    ctx.held = list(ids)  # as the draft's pass leaves it
    return keep


def test_new_source_goes_under_the_kept_header_and_target() -> None:
    seq_cache, ctx = cache(budget=8)
    reuse(seq_cache, ctx, [1, 2, 3], [50, 51, 52, 53, 54])
    keep = reuse(seq_cache, ctx, [1, 2, 3, 4], [50, 51, 52, 53, 54])
    assert ctx.inserts == [([4], len(HEAD) + 3)]
    assert seq_cache.inserted == 1
    # Everything but the prompt's last token, fed anew for its logits.
    assert keep == len(HEAD) + 4 + len(TAIL) + 5 - 1


def test_a_short_tail_is_recomputed_rather_than_inserted_under() -> None:
    seq_cache, ctx = cache(budget=8)
    reuse(seq_cache, ctx, [1, 2, 3], [50])
    keep = reuse(seq_cache, ctx, [1, 2, 3, 4], [50])
    assert len(TAIL) + 1 - 1 < MIN_SHIFTED_TOKENS
    assert ctx.inserts == [] and seq_cache.inserted == 0
    assert keep == len(HEAD) + 3


def test_the_budget_bounds_what_kept_cells_miss() -> None:
    seq_cache, ctx = cache(budget=3)
    target = [50, 51, 52, 53, 54]
    reuse(seq_cache, ctx, [1000], target)
    inserted = []
    for n in range(2, 8):
        reuse(seq_cache, ctx, list(range(1000, 1000 + n)), target)
        inserted.append(seq_cache.inserted)
        assert ctx.stale_tokens <= 3
    assert inserted == [1, 1, 1, 0, 1, 1]  # the fourth word would be one too many: recomputed


def test_no_budget_no_insert() -> None:
    seq_cache, ctx = cache(budget=0)
    reuse(seq_cache, ctx, [1, 2, 3], [50, 51, 52, 53, 54])
    reuse(seq_cache, ctx, [1, 2, 3, 4], [50, 51, 52, 53, 54])
    assert ctx.inserts == []


def test_a_changed_word_or_header_is_recomputed() -> None:
    seq_cache, ctx = cache(budget=8)
    target = [50, 51, 52, 53, 54]
    reuse(seq_cache, ctx, [1, 2, 3], target)
    reuse(seq_cache, ctx, [1, 2, 9, 4], target)  # the last word came out differently
    assert ctx.inserts == []
    reuse(seq_cache, ctx, [1, 2, 9, 4, 5], [60, 61, 62, 63, 64])  # a new target prefix
    assert ctx.inserts == []


def test_more_new_tokens_than_one_batch_are_recomputed() -> None:
    seq_cache, ctx = cache(budget=64, batch_size=4)
    reuse(seq_cache, ctx, [1], [50, 51, 52, 53, 54])
    reuse(seq_cache, ctx, [1, 2, 3, 4, 5, 6], [50, 51, 52, 53, 54])
    assert ctx.inserts == []


def test_an_exact_pass_recomputes_what_missed_words() -> None:
    seq_cache, ctx = cache(budget=8)
    target = [50, 51, 52, 53, 54]
    reuse(seq_cache, ctx, [1, 2, 3], target)
    reuse(seq_cache, ctx, [1, 2, 3, 4], target)
    assert ctx.stale_from == len(HEAD) + 4
    # The same prompt again, as a final pass (no source_end): it shares every token with
    # what the context holds, but the kept header and target are stale.
    ids, _, _ = prompt([1, 2, 3, 4], target)
    keep = seq_cache.reuse("utt", ids)
    assert keep == len(HEAD) + 4
    assert ctx.stale_from is None and ctx.stale_tokens == 0
