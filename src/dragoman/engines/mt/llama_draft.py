"""Drafting on llama.cpp: which key's KV cache the one sequence holds, and the pass of
`engines.mt.draft_loop` over a `TappedContext`.

One llama.cpp context holds one sequence: the key of the last call stays in it
(`SequenceCache.resident`); switching keys saves its state (keys and values, a few
MB) and loads the other's, so concurrent sessions keep their caches. A key with no
saved state starts from what the context holds: equal tokens give equal keys and
values, so the system prompt and instruction are rarely recomputed.

When the source grows, everything after it (the assistant header, the target prefix)
used to be recomputed, about half of an update's time. With a `stale_budget`, the new
source tokens are inserted before those cells instead (`TappedContext.insert`): the
kept cells then miss the newest words, so they are recomputed once more than
`stale_budget` source tokens were inserted under them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt import draft_loop
from dragoman.engines.mt.base import MTDraft
from dragoman.engines.mt.llama_context import SavedSequence, TappedContext
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.engines.torch_lm.kv_cache import MAX_CACHED_PROMPTS, LastDraft, common_prefix, opening

#: The fewest kept tokens worth an insert: it is one more `llama_decode`, which costs about
#: one decode step, as much as prefilling 7-8 tokens (78 ms a step, 9.6 ms a prefilled
#: token for the 1.5B on 2 cores, bench/RESULTS.md).
MIN_SHIFTED_TOKENS = 8


class SequenceCache:
    """Which key's KV cache the context holds, the saved states of others, and last drafts."""

    def __init__(
        self, ctx: TappedContext, max_entries: int = MAX_CACHED_PROMPTS, stale_budget: int = 0
    ) -> None:
        self._ctx = ctx
        self.max_entries = max(1, max_entries)
        #: Source tokens that may be inserted under kept cells before they are recomputed.
        self.stale_budget = stale_budget
        #: Source tokens the last `reuse` inserted under kept cells.
        self.inserted = 0
        self.resident: str | None = None
        self._saved: OrderedDict[str, SavedSequence] = OrderedDict()
        #: Each key's last draft, a guess of its next one.
        self._targets: OrderedDict[str, LastDraft] = OrderedDict()

    def reuse(self, key: str | None, ids: Sequence[int], source_end: int | None = None) -> int:
        """Make the context hold a prefix of `ids` for `key`; its length.

        The last prompt token is always left to feed: its logits give the first drafted token.
        With `source_end` (where the prompt's source ends), new source tokens may be inserted
        before kept cells (`stale_budget`).
        """
        ctx = self._ctx
        if key != self.resident:
            if self.resident is not None and ctx.held:
                self._saved[self.resident] = ctx.snapshot()
                self._saved.move_to_end(self.resident)
                while len(self._saved) > self.max_entries:
                    self._saved.popitem(last=False)
            state = self._saved.pop(key, None) if key is not None else None
            self.resident = key
            if state is not None:
                ctx.restore(state)
        keep = min(common_prefix(ctx.held, ids), len(ids) - 1)
        self.inserted = 0
        if source_end is not None:
            keep = self._insert_source(ids, source_end, keep)
        elif ctx.stale_from is not None:
            keep = min(keep, ctx.stale_from)  # an exact pass recomputes what missed some words
        ctx.truncate(keep)
        return keep

    def guess(self, key: str | None, prompt: Prompt) -> list[int]:
        """The key's last draft as a guess of this one (`LastDraft.guess`)."""
        last = self._targets.get(key) if key is not None else None
        return [] if last is None else last.guess(prompt.ids, prompt.source_start, prompt.target_start)

    def _insert_source(self, ids: Sequence[int], source_end: int, keep: int) -> int:
        """Insert the source tokens the context lacks before what it holds after its source,
        where that is worth it; returns how much of `ids` the context then holds."""
        ctx = self._ctx
        new = source_end - keep
        if not 0 < new <= ctx.batch_size or ctx.stale_tokens + new > self.stale_budget:
            return keep
        # What the context holds after its source (the header, the target prefix) and the
        # prompt has after its own; the prompt's last token is fed anew for its logits.
        kept = min(common_prefix(ctx.held[keep:], ids[source_end:]), len(ids) - 1 - source_end)
        if kept < MIN_SHIFTED_TOKENS:
            return keep
        ctx.truncate(keep + kept)
        ctx.insert(ids[keep:source_end], keep)
        self.inserted = new
        return source_end + kept

    def store(self, key: str | None, prompt: Prompt, target: list[int]) -> None:
        if key is None:
            return
        self._targets[key] = LastDraft(opening(prompt.ids, prompt.source_start), target)
        self._targets.move_to_end(key)
        while len(self._targets) > 4 * self.max_entries:
            self._targets.popitem(last=False)

    def drop(self, key: str) -> None:
        self._saved.pop(key, None)
        self._targets.pop(key, None)
        if self.resident == key:
            self.resident = None  # its tokens stay for prefix reuse, under no key

    def clear(self) -> None:
        self._saved.clear()
        self._targets.clear()
        self.resident = None
        self._ctx.truncate(0)


class _LlamaPass:
    """`draft_loop.DraftPass` on the context: choices and attention from `TappedContext.eval`."""

    def __init__(
        self, ctx: TappedContext, cache: SequenceCache, key: str | None, prompt: Prompt, cols: slice | None
    ) -> None:
        self._ctx, self._cache, self._key, self._prompt, self._cols = ctx, cache, key, prompt, cols
        self.cached = 0
        self.guess: list[int] = []

    def eval(self, feed: Sequence[int], out_from: int) -> tuple[list[int], npt.NDArray[np.float32] | None]:
        return self._ctx.eval(feed, out_from, self._cols)

    def is_stop(self, token: int) -> bool:
        return self._ctx.is_eog(token)

    def drop(self, count: int) -> None:
        self._ctx.truncate(len(self._ctx.held) - count)

    def finish(self, target: list[int]) -> dict[str, float]:
        self._cache.store(self._key, self._prompt, target)
        return {
            "inserted_tokens": float(self._cache.inserted),
            "stale_tokens": float(self._ctx.stale_tokens),
        }


def draft(
    ctx: TappedContext,
    cache: SequenceCache,
    cache_key: str | None,
    prompt: Prompt,
    heads: Sequence[tuple[int, int]] | None,
    limit: int,
    *,
    speculate: bool = True,
    frontier_word: int | None = None,
    past_frontier: int = 0,
    insert: bool = False,
    on_pass: Callable[[MTDraft], None] | None = None,
    wrap_up: threading.Event | None = None,
) -> MTDraft:
    """Up to `limit` greedy tokens after `prompt` (`draft_loop.run`); attention rows when
    `heads` is given.

    With `insert`, new source tokens may go under kept cells (`SequenceCache.stale_budget`).
    """
    started = time.perf_counter()
    source_end = prompt.source_end if insert else None
    cols = slice(prompt.source_start, prompt.source_end) if heads else None
    model = _LlamaPass(ctx, cache, cache_key, prompt, cols)
    model.cached = cache.reuse(cache_key, prompt.ids, source_end)
    model.guess = cache.guess(cache_key, prompt)
    ctx.tap.set_heads(heads or [])
    return draft_loop.run(
        model,
        prompt,
        heads is not None,
        limit,
        started=started,
        speculate=speculate,
        frontier_word=frontier_word,
        past_frontier=past_frontier,
        on_pass=on_pass,
        wrap_up=wrap_up,
    )
