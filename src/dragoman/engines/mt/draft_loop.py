"""The greedy draft loop of the Qwen MT engines, whatever runs the model (torch or llama.cpp).

Speculation. Decoding token by token costs far more than the prompt (a forward
pass per token), and consecutive drafts of an utterance mostly agree. So the
previous draft's tokens beyond the new target prefix are fed together with the
prompt and verified in that one forward pass, as in speculative decoding with
the last draft as the proposal: the greedy choices that match are kept (and
their attention rows), decoding resumes at the first mismatch, and the KV cache
is cut back to the accepted tokens. The draft is the greedy draft either way, up
to rounding: a batched pass can resolve a near-tie differently from a
token-by-token one. `speculate=False` turns this off.

A PARTIAL draft stops `past_frontier` tokens after the first token whose attention
peaks at or past the frontier word (`MTRequest.frontier_word`), and any draft ends
at a repetition loop (`cut_loop`). `on_pass` sees the draft after each pass that is
not the last (`MTRequest.on_pass`): a word the policy commits goes out while the
tokens after it are still being decoded, a tenth of a second or more apiece on a CPU.
A PARTIAL draft also ends after the pass under way once `wrap_up` is set
(`MTRequest.wrap_up`: the utterance's final pass waits for the engine).

What differs between backends is behind `DraftPass`: how a pass is fed and what
comes out of it (greedy choices, the tapped heads' attention), how the KV cache is
cut back, and what is kept for the key's next call (`qwen_draft` on torch,
`llama_draft` on llama.cpp).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt.base import MTDraft
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.engines.repetition import loop_start

_Row = TypeVar("_Row")


class DraftPass(Protocol):
    """One draft's view of a backend whose KV cache holds a prefix of the prompt."""

    #: How many prompt tokens the KV cache held at the start (reused, not computed).
    cached: int
    #: The key's previous draft beyond the new target prefix: the speculation's proposal.
    guess: list[int]

    def eval(self, feed: Sequence[int], out_from: int) -> tuple[list[int], npt.NDArray[np.float32] | None]:
        """Append `feed` to the KV cache: the greedy choice after each of `feed[out_from:]`,
        and with heads, their attention over the source tokens, [heads, rows, source tokens]."""
        ...

    def is_stop(self, token: int) -> bool: ...

    def drop(self, count: int) -> None:
        """Cut the last `count` fed tokens off the KV cache (rejected proposals)."""
        ...

    def finish(self, target: list[int]) -> dict[str, float]:
        """Keep what the key's next call reuses (`target`: prefix and draft); backend figures."""
        ...


def word_rows(
    per_head: npt.NDArray[np.float32], membership: npt.NDArray[np.float32]
) -> list[npt.NDArray[np.float32]]:
    """Rows of word attention from [heads, rows, source tokens].

    Each row is the mean over heads of each head's attention over the source
    words, normalised per head: a head that spends most of its weight on the
    attention sink (the first token) is not outvoted by one that does not.
    """
    per_word = per_head @ membership  # [heads, rows, words]
    per_word = per_word / np.maximum(per_word.sum(axis=-1, keepdims=True), 1e-9)
    return list(per_word.mean(axis=0).astype(np.float32))


def cut_loop(target_prefix: Sequence[int], tokens: list[int], rows: list[_Row]) -> bool:
    """Cut a repetition loop off the drafted `tokens` (and their attention `rows`), keeping one
    copy; True when there was one.

    Greedy decoding that repeats itself ("Die Konzepte der Konzepte der …") runs to the
    limit, four tokens a source word for a final pass: seconds, and a translation the
    client would show and the session would feed back as history.
    """
    cut = loop_start([*target_prefix, *tokens], len(target_prefix))
    if cut is None:
        return False
    del tokens[cut - len(target_prefix) :], rows[cut - len(target_prefix) :]
    return True


def frontier_limit(
    rows: Sequence[npt.NDArray[np.float32]], first: int, frontier_word: int, past: int, limit: int
) -> int:
    """The draft length once a row from `first` on peaks at or after `frontier_word`.

    Rows before `first` were checked on earlier passes. A row with no attention mass
    counts as beyond the frontier, as in the policy.
    """
    for index in range(first, min(len(rows), limit)):
        row = rows[index]
        if row.size == 0 or not row.max() > 0 or int(row.argmax()) >= frontier_word:
            return min(limit, index + 1 + past)
    return limit


def run(
    model: DraftPass,
    prompt: Prompt,
    with_attention: bool,
    limit: int,
    *,
    started: float,
    speculate: bool = True,
    frontier_word: int | None = None,
    past_frontier: int = 0,
    on_pass: Callable[[MTDraft], None] | None = None,
    wrap_up: threading.Event | None = None,
) -> MTDraft:
    """Up to `limit` greedy tokens after `prompt`; attention rows when `with_attention`.

    `started` is when the call began (`time.perf_counter`), for `engine_ms`.
    """
    pending = list(prompt.ids[model.cached :])
    proposal = model.guess[:limit] if speculate else []
    tokens: list[int] = []
    rows: list[npt.NDArray[np.float32]] = []
    target_prefix = list(prompt.ids[prompt.target_start :])
    finished = False
    computed = accepted = loop_cuts = 0
    first_pass_ms = 0.0
    membership = prompt.membership()
    while True:
        # Choice i follows feed[len(pending) - 1 + i]: after the pending tokens, then
        # after each proposed token in turn.
        feed = pending + proposal
        choices, attention = model.eval(feed, len(pending) - 1)
        computed += len(feed)
        first_pass_ms = first_pass_ms or (time.perf_counter() - started) * 1000.0
        new: list[int] = []
        matched = 0
        for i, choice in enumerate(choices):
            if model.is_stop(choice):
                finished = True
                break
            new.append(choice)
            if i < len(proposal) and choice == proposal[i]:
                matched += 1
                continue
            break
        if attention is not None and new:
            rows.extend(word_rows(attention[:, : len(new), :], membership))
            if frontier_word is not None:
                limit = frontier_limit(rows, len(tokens), frontier_word, past_frontier, limit)
        # Proposed tokens after the first mismatch were fed but are wrong.
        model.drop(len(proposal) - matched)
        tokens.extend(new)
        accepted += matched
        if cut_loop(target_prefix, tokens, rows):
            loop_cuts += 1
            break
        if finished or len(tokens) >= limit or (wrap_up is not None and wrap_up.is_set()):
            break
        if on_pass is not None and with_attention and rows:
            on_pass(MTDraft(token_ids=tokens[:], attention=np.stack(rows).astype(np.float32), finished=False))
        pending, proposal = [tokens[-1]], []
    del tokens[limit:], rows[limit:]
    backend_extra = model.finish(target_prefix + tokens)
    attention_out = None
    if with_attention:
        words = len(prompt.word_spans)
        attention_out = np.stack(rows).astype(np.float32) if rows else np.zeros((0, words), np.float32)
    return MTDraft(
        token_ids=tokens,
        attention=attention_out,
        finished=finished,
        computed_tokens=computed,
        extra={
            "engine_ms": (time.perf_counter() - started) * 1000.0,
            "first_pass_ms": first_pass_ms,
            "prompt_tokens": float(len(prompt.ids)),
            "cached_tokens": float(model.cached),
            **backend_extra,
            "speculated_tokens": float(len(model.guess[:limit]) if speculate else 0),
            "accepted_tokens": float(accepted),
            "loop_cuts": float(loop_cuts),
        },
    )
