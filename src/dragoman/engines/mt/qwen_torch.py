"""The Qwen MT engine on PyTorch, the reference for `qwen_llama` (`mt.backend = qwen-torch`).

The model runs in transformers with eager attention, and the weights of the
calibrated alignment heads (`engines.mt.heads`) are read through forward hooks on
those layers only. What both engines share: `engines.mt.qwen_engine`.

Loading: see `engines.torch_lm.files` (the packaged GGUF is converted once to a bf16
transformers folder in the cache). A user's own transformers folder or GGUF file
works as the model too.

Prompt: see `engines.mt.qwen_prompt`; appending a source word changes the prompt only
from the end of the source on. The KV cache of the longest common token prefix
with the previous prompt of the same `cache_key` is reused (`engines.torch_lm.kv_cache`),
so an update computes its new source tokens, the ~5-token assistant header, the
target prefix and the draft. Drafting, with speculation on the previous draft:
`engines.mt.draft_loop` over `engines.mt.qwen_draft`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dragoman.config import MTSettings
from dragoman.cpu import cpu_info
from dragoman.engines.info import EngineInfo
from dragoman.engines.mt.base import DraftMode, MTDraft, MTEngine, MTRequest
from dragoman.engines.mt.presets import preset_model
from dragoman.engines.mt.qwen_draft import Drafter
from dragoman.engines.mt.qwen_engine import QwenMTEngine
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.engines.torch_lm.files import prepare_model
from dragoman.engines.torch_lm.kv_cache import MAX_CACHED_PROMPTS, PromptCaches
from dragoman.engines.torch_lm.load import choose_compute_type, default_threads, load_model, widest_linear
from dragoman.errors import EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)


class QwenTorchMTEngine(QwenMTEngine):
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
        self._init_heads(heads_dir, cache_dir)
        self.speculate = speculate
        self.num_layers = len(self._model.model.layers)
        self.num_heads = int(self._model.config.num_attention_heads)
        # Qwen's chat turns end with <|im_end|>; other models' with their eos token(s).
        stops = {self._tokenizer.eos_token_id, self._tokenizer.convert_tokens_to_ids("<|im_end|>")}
        eos = self._model.generation_config.eos_token_id
        stops.update(eos if isinstance(eos, list) else [eos])
        stops.discard(self._tokenizer.unk_token_id)
        stop_ids = frozenset(int(i) for i in stops if isinstance(i, int) and i >= 0)
        self._caches = PromptCaches(self._model.config, max_cached_prompts)
        self._drafter = Drafter(self._model, stop_ids, self._caches)
        self._init_prompts(self._tokenizer, self._caches.max_entries)
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

    def _draft(
        self, request: MTRequest, prompt: Prompt, heads: list[tuple[int, int]] | None, limit: int
    ) -> MTDraft:
        final = request.mode is DraftMode.FINAL
        try:
            return self._drafter.draft(
                request.cache_key,
                prompt,
                heads,
                limit,
                speculate=self.speculate,
                frontier_word=None if final else request.frontier_word,
                past_frontier=request.past_frontier_tokens,
                on_pass=None if final else request.on_pass,
                wrap_up=None if final else request.wrap_up,
            )
        except (RuntimeError, ValueError, IndexError) as exc:
            if request.cache_key is not None:
                self._caches.drop(request.cache_key)
            raise EngineFailure(f"MT draft failed: {exc}") from exc

    def _forget_cache(self, cache_key: str) -> None:
        self._caches.drop(cache_key)

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
        with self._lock, torch.inference_mode(), self._drafter.tap(all_heads, cols) as captured:
            self._drafter.forward(prompt.ids, self._caches.new_kv())
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


def create(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """The registry's factory: the model of `settings.preset`, or `mt.model` when set.

    Optional settings read when present: `mt.model` (a packaged name, a transformers
    folder or a GGUF file), `mt.threads` (0: half the cores), `mt.speculate` and
    `mt.compute_type` (auto, int8, bfloat16 or float32; see `engines.torch_lm.load`).
    """
    # `auto` is the 0.5B here: the 1.5B in torch is too slow on every CPU measured (bench/RESULTS.md).
    model = str(settings.model or preset_model(settings.preset))
    model_dir, model_id, sha = prepare_model(model, cache_dir)
    return QwenTorchMTEngine(
        model_dir,
        model_id=model_id,
        model_sha256=sha,
        heads_dir=settings.heads_dir,
        cache_dir=cache_dir,
        threads=settings.threads,
        speculate=settings.speculate,
        compute_type=settings.compute_type,
    )
