"""Greedy drafting for the Qwen MT engine: speculation, KV reuse and alignment-head attention.

Speculation. Decoding token by token costs far more than the prompt (a forward
pass per token), and consecutive drafts of an utterance mostly agree. So the
previous draft's tokens beyond the new target prefix are fed together with the
prompt and verified in that one forward pass, as in speculative decoding with
the last draft as the proposal: the greedy choices that match are kept (and
their attention rows), decoding resumes at the first mismatch, and the KV cache
is cut back to the accepted tokens. The draft is the greedy draft either way, up
to bf16 rounding: a batched pass can resolve a near-tie (logits within ~0.3)
differently from a token-by-token one. `speculate=False` turns this off.

Attention: forward hooks on the calibrated heads' layers only record those heads'
weights over the source tokens (eager attention returns them; sdpa does not).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt.base import MTDraft
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.engines.repetition import loop_start
from dragoman.engines.torch_lm.kv_cache import CacheEntry, PromptCaches
from dragoman.errors import EngineFailure


def word_rows(captured: Mapping[int, Any], membership: Any, first: int, count: int) -> list[Any]:
    """Word attention of query rows [first, first + count) of the last forward pass.

    Each row is the mean over heads of each head's attention over the source
    words, normalised per head: a head that spends most of its weight on the
    attention sink (the first token) is not outvoted by one that does not.
    """
    import torch

    per_head = torch.cat([captured[layer][:, first : first + count, :] for layer in sorted(captured)])
    per_word = per_head @ membership  # [heads, rows, words]
    per_word = per_word / per_word.sum(dim=-1, keepdim=True).clamp_min(1e-9)
    return list(per_word.mean(dim=0).numpy().astype(np.float32))


def cut_loop(target_prefix: Sequence[int], tokens: list[int], rows: list[Any]) -> bool:
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


class Drafter:
    """Forward passes of one loaded causal LM, with per-key KV caches and attention taps.

    Not thread-safe: the engine serializes its calls.
    """

    def __init__(self, model: Any, stop_ids: frozenset[int], caches: PromptCaches) -> None:
        self._model = model
        self._layers: Any = model.model.layers
        self._stop_ids = stop_ids
        self.caches = caches
        self._cache_kwarg = (
            "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        )

    @contextmanager
    def tap(self, heads: Sequence[tuple[int, int]], cols: slice) -> Iterator[dict[int, Any]]:
        """Record the selected heads' attention weights over key positions `cols` per layer.

        Yields {layer: tensor [heads of that layer, query rows, cols]}, refreshed by
        every forward pass.
        """
        by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            by_layer.setdefault(layer, []).append(head)
        captured: dict[int, Any] = {}
        handles = []

        def hook_for(layer: int) -> Any:
            index = by_layer[layer]

            def hook(_module: Any, _args: Any, output: Any) -> None:
                weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
                if weights is None:
                    raise EngineFailure("the attention layer returned no weights (not eager attention?)")
                captured[layer] = weights[0, index, :, cols].float()

            return hook

        try:
            for layer in by_layer:
                handles.append(self._layers[layer].self_attn.register_forward_hook(hook_for(layer)))
            yield captured
        finally:
            for handle in handles:
                handle.remove()

    def forward(self, ids: Sequence[int], kv: Any, logits_to_keep: int = 1) -> Any:
        import torch

        return self._model(
            input_ids=torch.tensor([list(ids)], dtype=torch.long),
            use_cache=True,
            logits_to_keep=logits_to_keep,
            **{self._cache_kwarg: kv},
        )

    def draft(
        self,
        cache_key: str | None,
        prompt: Prompt,
        heads: Sequence[tuple[int, int]] | None,
        limit: int,
        *,
        speculate: bool = True,
        frontier_word: int | None = None,
        past_frontier: int = 0,
    ) -> MTDraft:
        """Up to `limit` greedy tokens after `prompt`; attention rows when `heads` is given.

        `frontier_word`: stop `past_frontier` tokens after the first token whose
        attention peaks at or after that source word (see `MTRequest.frontier_word`).
        """
        import torch

        started = time.perf_counter()
        kv, keep, guess = self.caches.reuse(cache_key, prompt.ids, prompt.target_start)
        fed = list(prompt.ids[:keep])  # what the KV cache holds, kept in step with it
        pending = list(prompt.ids[keep:])
        proposal = guess[:limit] if speculate else []
        tokens: list[int] = []
        rows: list[npt.NDArray[np.float32]] = []
        target_prefix = prompt.ids[prompt.target_start :]
        finished = False
        computed = accepted = loop_cuts = 0
        first_pass_ms = 0.0
        membership = torch.from_numpy(prompt.membership())
        cols = slice(prompt.source_start, prompt.source_end)
        with torch.inference_mode(), self.tap(heads or [], cols) as tap:
            while True:
                # Logits row i follows feed[len(pending) - 1 + i]: the choice after the
                # pending tokens, then after each proposed token in turn.
                feed = pending + proposal
                out = self.forward(feed, kv, logits_to_keep=len(proposal) + 1)
                computed += len(feed)
                first_pass_ms = first_pass_ms or (time.perf_counter() - started) * 1000.0
                new: list[int] = []
                matched = 0
                for i, choice in enumerate(int(t) for t in out.logits[0].argmax(dim=-1)):
                    if choice in self._stop_ids:
                        finished = True
                        break
                    new.append(choice)
                    if i < len(proposal) and choice == proposal[i]:
                        matched += 1
                        continue
                    break
                if heads and new:
                    rows.extend(word_rows(tap, membership, len(pending) - 1, len(new)))
                    if frontier_word is not None:
                        limit = frontier_limit(rows, len(tokens), frontier_word, past_frontier, limit)
                # Proposed tokens after the first mismatch were fed but are wrong.
                if len(proposal) > matched:
                    kv.crop(matched - len(proposal))
                fed.extend(pending + proposal[:matched])
                tokens.extend(new)
                accepted += matched
                if cut_loop(target_prefix, tokens, rows):
                    loop_cuts += 1
                    break
                if finished or len(tokens) >= limit:
                    break
                pending, proposal = [tokens[-1]], []
        del tokens[limit:], rows[limit:]
        if int(kv.get_seq_length()) == len(fed):
            self.caches.store(cache_key, CacheEntry(fed, kv, target_prefix + tokens))
        attention = None
        if heads is not None:
            words = len(prompt.word_spans)
            attention = np.stack(rows).astype(np.float32) if rows else np.zeros((0, words), np.float32)
        return MTDraft(
            token_ids=tokens,
            attention=attention,
            finished=finished,
            computed_tokens=computed,
            extra={
                "engine_ms": (time.perf_counter() - started) * 1000.0,
                "first_pass_ms": first_pass_ms,
                "prompt_tokens": float(len(prompt.ids)),
                "cached_tokens": float(keep),
                "speculated_tokens": float(len(guess[:limit]) if speculate else 0),
                "accepted_tokens": float(accepted),
                "loop_cuts": float(loop_cuts),
            },
        )
