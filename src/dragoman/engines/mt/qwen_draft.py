"""Drafting on torch: forward passes of a transformers causal LM with per-key KV caches
and attention taps, under the loop of `engines.mt.draft_loop`.

Attention: forward hooks on the calibrated heads' layers only record those heads'
weights over the source tokens (eager attention returns them; sdpa does not).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt import draft_loop
from dragoman.engines.mt.base import MTDraft
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.engines.torch_lm.kv_cache import CacheEntry, LastDraft, PromptCaches, opening
from dragoman.errors import EngineFailure


class _TorchPass:
    """`draft_loop.DraftPass` on a `Drafter`: one forward pass per `eval`, rows from the taps."""

    def __init__(
        self,
        drafter: Drafter,
        key: str | None,
        kv: Any,
        fed: list[int],
        captured: dict[int, Any],
        opening: tuple[int, ...],
    ) -> None:
        self._drafter, self._key, self._kv, self._captured = drafter, key, kv, captured
        self._opening = opening
        #: What the KV cache holds, kept in step with it.
        self._fed = fed
        self.cached = len(fed)
        self.guess: list[int] = []

    def eval(self, feed: Sequence[int], out_from: int) -> tuple[list[int], npt.NDArray[np.float32] | None]:
        import torch

        out = self._drafter.forward(feed, self._kv, logits_to_keep=len(feed) - out_from)
        self._fed.extend(feed)
        choices = [int(t) for t in out.logits[0].argmax(dim=-1)]
        if not self._captured:
            return choices, None
        captured = self._captured
        per_head = torch.cat([captured[layer][:, out_from:, :] for layer in sorted(captured)])
        return choices, per_head.numpy()

    def is_stop(self, token: int) -> bool:
        return token in self._drafter.stop_ids

    def drop(self, count: int) -> None:
        if count > 0:
            self._kv.crop(-count)
            del self._fed[-count:]

    def finish(self, target: list[int]) -> dict[str, float]:
        if int(self._kv.get_seq_length()) == len(self._fed):
            last = LastDraft(self._opening, target)
            self._drafter.caches.store(self._key, CacheEntry(self._fed, self._kv, last))
        return {}


class Drafter:
    """Forward passes of one loaded causal LM, with per-key KV caches and attention taps.

    Not thread-safe: the engine serializes its calls.
    """

    def __init__(self, model: Any, stop_ids: frozenset[int], caches: PromptCaches) -> None:
        self._model = model
        self._layers: Any = model.model.layers
        self.stop_ids = stop_ids
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
        on_pass: Callable[[MTDraft], None] | None = None,
        wrap_up: threading.Event | None = None,
    ) -> MTDraft:
        """Up to `limit` greedy tokens after `prompt` (`draft_loop.run`); attention rows when
        `heads` is given."""
        import torch

        started = time.perf_counter()
        kv, keep, guess = self.caches.reuse(cache_key, prompt.ids, prompt.source_start, prompt.target_start)
        cols = slice(prompt.source_start, prompt.source_end)
        with torch.inference_mode(), self.tap(heads or [], cols) as captured:
            start = opening(prompt.ids, prompt.source_start)
            model = _TorchPass(self, cache_key, kv, list(prompt.ids[:keep]), captured, start)
            model.guess = guess
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
