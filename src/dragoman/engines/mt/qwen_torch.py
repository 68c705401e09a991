"""The default MT backend: a Qwen2.5 instruct model on PyTorch, with alignment-head attention.

llama.cpp exposes no attention, so AlignAtt runs the model in transformers with
eager attention and reads the weights of the calibrated alignment heads
(`engines.mt.heads`) through forward hooks on those layers only.

Loading: see `engines.torch_lm.files` (the packaged GGUF is converted once to a bf16
transformers folder in the cache). A user's own transformers folder or GGUF file
works as the model too.

Prompt: see `engines.mt.qwen_prompt`; appending a source word changes the prompt only
from the end of the source on. The KV cache of the longest common token prefix
with the previous prompt of the same `cache_key` is reused, so an update
computes its new source tokens, the ~5-token assistant header, the target
prefix and the draft.

Speculation. Decoding token by token costs far more than the prompt (a forward
pass per token), and consecutive drafts of an utterance mostly agree. So the
previous draft's tokens beyond the new target prefix are fed together with the
prompt and verified in that one forward pass, as in speculative decoding with
the last draft as the proposal: the greedy choices that match are kept (and
their attention rows), decoding resumes at the first mismatch, and the KV cache
is cut back to the accepted tokens. The draft is the greedy draft either way, up
to bf16 rounding: a batched pass can resolve a near-tie (logits within ~0.3)
differently from a token-by-token one. `speculate=False` turns this off.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.config import MTSettings
from dragoman.cpu import cpu_info
from dragoman.engines.info import EngineInfo
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.base import DraftMode, MTDraft, MTEngine, MTRequest
from dragoman.engines.mt.presets import DEFAULT_MODEL, PRESETS
from dragoman.engines.mt.qwen_prompt import Prompt, PromptBuilder
from dragoman.engines.torch_lm.files import prepare_model
from dragoman.engines.torch_lm.load import choose_compute_type, default_threads, load_model, widest_linear
from dragoman.errors import ClientError, ConfigError, EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Utterances whose KV caches are kept (least recently used dropped first).
MAX_CACHED_PROMPTS = 8
#: Longest FINAL pass when the request asks for less: about two target tokens per source token.
FINAL_TOKENS_PER_SOURCE_TOKEN = 2


@dataclass
class _CacheEntry:
    #: Tokens whose keys and values `kv` holds, in order.
    ids: list[int]
    kv: Any
    #: The last call's target side: prefix tokens, then the drafted ones.
    target: list[int]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class QwenTorchMTEngine(MTEngine):
    """Greedy drafts with alignment-head attention; KV cache reuse per `cache_key`."""

    def __init__(
        self,
        model_dir: Path,
        *,
        model_id: str,
        model_sha256: str | None = None,
        heads_dir: Path | None = None,
        cache_dir: Path | None = None,
        threads: int = 0,
        final_max_new_tokens: int = 256,
        max_cached_prompts: int = MAX_CACHED_PROMPTS,
        speculate: bool = True,
        compute_type: str = "auto",
    ) -> None:
        import torch

        torch.set_num_threads(threads if threads > 0 else default_threads())
        started = time.perf_counter()
        #: `auto` resolved for this CPU, measured with the threads just set.
        self.compute = choose_compute_type(compute_type, shape=widest_linear(model_dir))
        self.compute_type = self.compute.compute_type
        self._tokenizer, self._model = load_model(model_dir, self.compute_type)
        self.load_seconds = time.perf_counter() - started
        self.name = model_id
        self.model_dir = model_dir
        self.model_sha256 = model_sha256
        self._heads_dirs = mt_heads.search_dirs(heads_dir, cache_dir)
        self._heads: dict[str, mt_heads.HeadsFile] = {}
        self.final_max_new_tokens = final_max_new_tokens
        self._max_cached = max(1, max_cached_prompts)
        self.speculate = speculate
        self._caches: OrderedDict[str, _CacheEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._layers: Any = self._model.model.layers
        self.num_layers = len(self._layers)
        self.num_heads = int(self._model.config.num_attention_heads)
        self._cache_kwarg = (
            "cache" if "cache" in inspect.signature(self._model.forward).parameters else "past_key_values"
        )
        # Qwen's chat turns end with <|im_end|>; other models' with their eos token(s).
        stops = {self._tokenizer.eos_token_id, self._tokenizer.convert_tokens_to_ids("<|im_end|>")}
        eos = self._model.generation_config.eos_token_id
        stops.update(eos if isinstance(eos, list) else [eos])
        stops.discard(self._tokenizer.unk_token_id)
        self._stop_ids = frozenset(int(i) for i in stops if isinstance(i, int) and i >= 0)
        self._prompts = PromptBuilder(self._tokenizer, memo_size=4 * self._max_cached)
        log.info(
            "MT model loaded",
            model=model_id,
            compute_type=self.compute_type,
            compute_reason=self.compute.reason,
            cpu=cpu_info().describe(),
            seconds=round(self.load_seconds, 2),
        )

    def describe(self) -> EngineInfo:
        return EngineInfo(
            name=self.name,
            backend="qwen-torch",
            device="cpu",
            compute_type=self.compute_type,
            compute_reason=self.compute.reason,
        )

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
    ) -> Prompt:
        return self._prompts.build(
            source_lang, target_lang, source_words, target_prefix, context_text, history
        )

    # -- caches ----------------------------------------------------------------------------

    def _new_kv(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self._model.config)
        except TypeError:  # transformers 4.x
            return DynamicCache()

    def _reuse(self, cache_key: str | None, prompt: Prompt) -> tuple[Any, int, list[int]]:
        """(a KV cache holding a prefix of the prompt, that prefix's length, a guess of the draft).

        The prefix is shorter than the prompt: the last prompt token is always fed,
        since its logits give the first drafted token. The guess is the previous
        draft of this key beyond the new target prefix, when it continues that prefix.
        """
        entry = self._caches.pop(cache_key, None) if cache_key is not None else None
        if entry is None:
            return self._new_kv(), 0, []
        held = int(entry.kv.get_seq_length())
        if held != len(entry.ids):
            return self._new_kv(), 0, []
        keep = min(_common_prefix(entry.ids, prompt.ids), len(prompt.ids) - 1)
        if keep < held:
            entry.kv.crop(keep - held)  # negative: drop that many trailing positions
        prefix = prompt.ids[prompt.target_start :]
        guess = entry.target[len(prefix) :] if entry.target[: len(prefix)] == prefix else []
        return entry.kv, keep, guess

    def _store(self, cache_key: str | None, entry: _CacheEntry) -> None:
        if cache_key is None:
            return
        self._caches[cache_key] = entry
        self._caches.move_to_end(cache_key)
        while len(self._caches) > self._max_cached:
            self._caches.popitem(last=False)

    def forget(self, cache_key: str) -> None:
        with self._lock:
            self._caches.pop(cache_key, None)

    # -- attention capture -----------------------------------------------------------------

    @contextmanager
    def _tap(self, heads: Sequence[tuple[int, int]], cols: slice) -> Iterator[dict[int, Any]]:
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

    @staticmethod
    def _word_rows(captured: Mapping[int, Any], membership: Any, first: int, count: int) -> list[Any]:
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

    # -- forward passes --------------------------------------------------------------------

    def _forward(self, ids: Sequence[int], kv: Any, logits_to_keep: int = 1) -> Any:
        import torch

        return self._model(
            input_ids=torch.tensor([list(ids)], dtype=torch.long),
            use_cache=True,
            logits_to_keep=logits_to_keep,
            **{self._cache_kwarg: kv},
        )

    def draft(self, request: MTRequest) -> MTDraft:
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
        )
        limit = max(1, request.max_new_tokens)
        if final:
            guess = FINAL_TOKENS_PER_SOURCE_TOKEN * (prompt.source_end - prompt.source_start) + 16
            limit = max(limit, min(self.final_max_new_tokens, guess))
        with self._lock:
            try:
                stop = None if final else request.frontier_word
                return self._decode_loop(
                    request.cache_key, prompt, heads, limit, stop, request.past_frontier_tokens
                )
            except (RuntimeError, ValueError, IndexError) as exc:
                if request.cache_key is not None:
                    self._caches.pop(request.cache_key, None)
                raise EngineFailure(f"MT draft failed: {exc}") from exc

    def _decode_loop(
        self,
        cache_key: str | None,
        prompt: Prompt,
        heads: Sequence[tuple[int, int]] | None,
        limit: int,
        frontier_word: int | None = None,
        past_frontier: int = 0,
    ) -> MTDraft:
        import torch

        started = time.perf_counter()
        kv, keep, guess = self._reuse(cache_key, prompt)
        fed = list(prompt.ids[:keep])  # what the KV cache holds, kept in step with it
        pending = list(prompt.ids[keep:])
        proposal = guess[:limit] if self.speculate else []
        tokens: list[int] = []
        rows: list[npt.NDArray[np.float32]] = []
        finished = False
        computed = accepted = 0
        first_pass_ms = 0.0
        membership = torch.from_numpy(prompt.membership())
        cols = slice(prompt.source_start, prompt.source_end)
        with torch.inference_mode(), self._tap(heads or [], cols) as tap:
            while True:
                # Logits row i follows feed[len(pending) - 1 + i]: the choice after the
                # pending tokens, then after each proposed token in turn.
                feed = pending + proposal
                out = self._forward(feed, kv, logits_to_keep=len(proposal) + 1)
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
                    rows.extend(self._word_rows(tap, membership, len(pending) - 1, len(new)))
                    if frontier_word is not None:
                        limit = _frontier_limit(rows, len(tokens), frontier_word, past_frontier, limit)
                # Proposed tokens after the first mismatch were fed but are wrong.
                if len(proposal) > matched:
                    kv.crop(matched - len(proposal))
                fed.extend(pending + proposal[:matched])
                tokens.extend(new)
                accepted += matched
                if finished or len(tokens) >= limit:
                    break
                pending, proposal = [tokens[-1]], []
        del tokens[limit:], rows[limit:]
        if int(kv.get_seq_length()) == len(fed):
            self._store(cache_key, _CacheEntry(fed, kv, prompt.ids[prompt.target_start :] + tokens))
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
                "speculated_tokens": float(len(guess[:limit]) if self.speculate else 0),
                "accepted_tokens": float(accepted),
            },
        )

    def teacher_forced_attention(
        self, source_lang: str, target_lang: str, source_words: Sequence[str], target_text: str
    ) -> tuple[npt.NDArray[np.float32], list[int], list[tuple[int, int]]]:
        """Every head's attention from each target token to the source words, teacher-forced.

        Returns (attention [layers, heads, target tokens, words], the target token ids,
        each token's character span in `target_text`). Row j is the attention of the
        position that predicts target token j, as in a draft. Rows are raw weights
        summed per word (not normalised). For calibration.
        """
        import torch

        prompt = self.build_prompt(source_lang, target_lang, source_words, target_text)
        encoded = self._tokenizer(target_text, add_special_tokens=False, return_offsets_mapping=True)
        target_ids = list(encoded["input_ids"])
        offsets = [(int(a), int(b)) for a, b in encoded["offset_mapping"]]
        if prompt.ids[prompt.target_start :] != target_ids:
            raise EngineFailure("the target tokenizes differently inside the prompt")
        all_heads = [(layer, h) for layer in range(self.num_layers) for h in range(self.num_heads)]
        membership = torch.from_numpy(prompt.membership())
        cols = slice(prompt.source_start, prompt.source_end)
        with self._lock, torch.inference_mode(), self._tap(all_heads, cols) as captured:
            self._forward(prompt.ids, self._new_kv())
            first = prompt.target_start - 1
            rows = slice(first, first + len(target_ids))
            stacked = torch.stack([captured[layer][:, rows, :] for layer in range(self.num_layers)])
            attention = (stacked @ membership).numpy().astype(np.float32)
        return attention, target_ids, offsets

    # -- text ------------------------------------------------------------------------------

    def decode(self, token_ids: Sequence[int]) -> str:
        text: str = self._tokenizer.decode(
            list(token_ids), skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        return text

    def close(self) -> None:
        with self._lock:
            self._caches.clear()


def _frontier_limit(
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


def create(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """The registry's factory: the model of `settings.preset`, or `mt.model` when set.

    Optional settings read when present: `mt.model` (a packaged name, a transformers
    folder or a GGUF file), `mt.threads` (0: half the cores), `mt.speculate` and
    `mt.compute_type` (auto, int8, bfloat16 or float32; see `engines.torch_lm.load`).
    """
    preset = PRESETS.get(settings.preset)
    if preset is None:
        raise ConfigError(f"unknown MT preset {settings.preset!r}; presets: {', '.join(sorted(PRESETS))}")
    model = str(settings.model or preset.model or DEFAULT_MODEL)
    model_dir, model_id, sha = prepare_model(model, cache_dir)
    return QwenTorchMTEngine(
        model_dir,
        model_id=model_id,
        model_sha256=sha,
        heads_dir=settings.heads_dir,
        cache_dir=cache_dir,
        threads=settings.threads,
        final_max_new_tokens=preset.final_max_new_tokens,
        speculate=settings.speculate,
        compute_type=settings.compute_type,
    )
