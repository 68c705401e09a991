"""What the Qwen MT engines share whatever runs the model: heads, prompts and the draft request.

`QwenMTEngine` checks a request (the direction's calibrated heads for a partial draft,
the token budget of a final one), builds its prompt (`engines.mt.qwen_prompt`) and
hands it to the backend under the engine's lock: `qwen_torch` (transformers) and
`qwen_llama` (llama.cpp) say only how a draft is run.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.base import (
    DraftMode,
    MTCapabilities,
    MTDraft,
    MTEngine,
    MTRequest,
    final_token_budget,
    nothing_drafted,
)
from dragoman.engines.mt.qwen_prompt import Prompt, PromptBuilder, Spellings
from dragoman.errors import ClientError, ConfigError
from dragoman.logs import get_logger

log = get_logger(__name__)


class QwenMTEngine(MTEngine):
    """Greedy drafts with alignment-head attention and KV reuse per `cache_key`.

    A subclass sets `name`, `num_layers` and `num_heads`, calls `_init_heads` and
    `_init_prompts`, runs drafts in `_draft` and drops a session's cache in `_forget_cache`.
    """

    capabilities = MTCapabilities(attention=True, prompt_context=True, kv_reuse=True, frontier_stop=True)

    num_layers: int
    num_heads: int
    _prompts: PromptBuilder
    _spellings: Spellings

    def _init_prompts(self, tokenizer: Any, cached_keys: int) -> None:
        """Prompts built with `tokenizer`, and the spellings of as many sessions' history turns
        as the backend caches (`qwen_prompt.Spellings`)."""
        self._prompts = PromptBuilder(tokenizer, memo_size=4 * cached_keys)
        self._spellings = Spellings(4 * cached_keys)

    def _init_heads(self, heads_dir: Path | None, cache_dir: Path | None) -> None:
        self._heads_dirs = mt_heads.search_dirs(heads_dir, cache_dir)
        self._heads: dict[str, mt_heads.HeadsFile] = {}
        #: Serialises drafts: a backend's KV cache serves one call at a time.
        self._lock = threading.Lock()

    # -- directions and heads --------------------------------------------------------------

    def directions(self) -> list[str]:
        return mt_heads.directions(self.name, self._heads_dirs)

    def heads(self, direction: str) -> mt_heads.HeadsFile | None:
        if direction not in self._heads:
            found = mt_heads.find(self.name, direction, self._heads_dirs)
            if found is None:
                return None
            bad = [
                (layer, h) for layer, h in found.pairs() if layer >= self.num_layers or h >= self.num_heads
            ]
            if bad:
                raise ConfigError(
                    f"alignment heads {bad} of {self.name} {direction} do not exist in the model"
                )
            self._heads[direction] = found
        return self._heads[direction]

    # -- prompt ----------------------------------------------------------------------------

    def build_prompt(
        self,
        source_lang: str,
        target_lang: str,
        source_words: Sequence[str],
        target_prefix: str = "",
        context_text: str | None = None,
        history: Sequence[tuple[str, str]] = (),
        force_target_language: bool = False,
        spelled: Mapping[str, Sequence[int]] | None = None,
    ) -> Prompt:
        return self._prompts.build(
            source_lang,
            target_lang,
            source_words,
            target_prefix,
            context_text,
            history,
            force_target_language,
            spelled,
        )

    # -- drafting --------------------------------------------------------------------------

    def draft(self, request: MTRequest) -> MTDraft:
        spelled = self._spellings.of(request.cache_key)
        if request.mode is DraftMode.PREFILL:
            prompt = self.build_prompt(
                request.source_lang,
                request.target_lang,
                [],
                "",
                request.context_text,
                request.history,
                spelled=spelled,
            )
            with self._lock:
                computed = self._prefill(request.cache_key, prompt)
            return replace(nothing_drafted(), computed_tokens=computed)
        direction = f"{request.source_lang}-{request.target_lang}"
        final = request.mode is DraftMode.FINAL
        heads = None
        if not final:
            found = self.heads(direction)
            if found is None:
                raise ClientError(f"Unsupported direction {direction}.", code="unsupported_direction")
            heads = found.pairs()
        words = list(request.source_words)
        if not words:
            return MTDraft(
                token_ids=[], attention=None if final else np.zeros((0, 0), np.float32), finished=True
            )
        prompt = self.build_prompt(
            request.source_lang,
            request.target_lang,
            words,
            request.target_prefix,
            request.context_text,
            request.history,
            request.force_target_language,
            spelled,
        )
        if final:
            limit = final_token_budget(len(words), prompt.source_end - prompt.source_start)
        else:
            limit = max(1, request.max_new_tokens)
        with self._lock:
            drafted = self._draft(request, prompt, heads, limit)
            if final:
                self._spellings.record(
                    request.cache_key, request.source_lang, words, prompt, drafted.token_ids, self.decode
                )
        # Where a draft's time went: the prompt it computed, the proposal it accepted, the passes.
        log.debug(
            "mt draft",
            mode=request.mode.value,
            words=len(words),
            drafted=len(drafted.token_ids),
            computed=drafted.computed_tokens,
            **{k: round(v) for k, v in drafted.extra.items()},
        )
        return drafted

    def forget(self, cache_key: str) -> None:
        with self._lock:
            self._spellings.drop(cache_key)
            self._forget_cache(cache_key)

    @abstractmethod
    def _forget_cache(self, cache_key: str) -> None:
        """Drop the backend's cache of `cache_key`; called under the lock."""

    def _prefill(self, cache_key: str | None, prompt: Prompt) -> int:
        """Compute `prompt` up to its source into the KV cache of `cache_key` (DraftMode.PREFILL);
        called under the lock; the tokens computed. By default none: the torch engine's first
        update computes them."""
        return 0

    @abstractmethod
    def _draft(
        self, request: MTRequest, prompt: Prompt, heads: list[tuple[int, int]] | None, limit: int
    ) -> MTDraft:
        """Up to `limit` greedy tokens after `prompt`, attention rows when `heads` is given;
        called under the lock. A failure leaves no half-fed state behind."""
