"""The Qwen MT engine on llama.cpp: the packaged Q4_K_M GGUF with its own quantised kernels.

The same model, prompts (`engines.mt.qwen_prompt`), heads files and drafting
contract as `engines.mt.qwen_torch`, which stays the reference: the GGUF runs as
it is instead of dequantised into torch, so the 1.5B fits the latency budget on
CPUs with AVX2 only. The alignment heads' attention comes from llama.cpp's eval
callback (`engines.mt.llama_tap`); KV reuse from `engines.mt.llama_draft`, and
speculation and the frontier stop from the loop both engines run (`engines.mt.draft_loop`).

Differences from the torch engine: Q4_K weights (the argmax of the heads' attention
agrees with torch's on most but not all tokens, see tests/engine/test_mt_llama.py),
no conversion step at first start, and a translation into a Latin-script language never
chooses an East Asian token, nor opens with a quote its source lacks (`engines.mt.target_script`).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dragoman.config import MTSettings
from dragoman.cpu import available_cores, cpu_info
from dragoman.engines.info import EngineInfo
from dragoman.engines.llama_speed import describe, pick_by_speed
from dragoman.engines.llama_threads import idle_threads_setting
from dragoman.engines.mt import llama_draft
from dragoman.engines.mt.base import DraftMode, MTDraft, MTEngine, MTRequest
from dragoman.engines.mt.lanes import MTLanes, auto_lanes
from dragoman.engines.mt.llama_context import TappedContext
from dragoman.engines.mt.model_choice import (
    SPEED_MEMORY_FILE,
    SpeedSample,
    choose_model,
    measure,
    probe_text,
)
from dragoman.engines.mt.presets import (
    AUTO_PRESET,
    DEFAULT_MODEL,
    QUALITY_MODEL,
    model_installed,
    preset_model,
)
from dragoman.engines.mt.qwen_engine import QwenMTEngine
from dragoman.engines.mt.qwen_prompt import Prompt
from dragoman.engines.mt.target_script import TargetScript, quoted
from dragoman.engines.torch_lm.kv_cache import MAX_CACHED_PROMPTS
from dragoman.errors import ConfigError, EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Prompt (system, history, source) plus a FINAL pass (at most 1024 tokens).
CONTEXT_TOKENS = 4096


class QwenLlamaMTEngine(QwenMTEngine):
    """Greedy drafts with alignment-head attention on llama.cpp; KV reuse per `cache_key`."""

    def __init__(
        self,
        gguf: Path,
        *,
        model_id: str,
        model_sha256: str | None = None,
        heads_dir: Path | None = None,
        cache_dir: Path | None = None,
        threads: int = 0,
        idle_threads: int = 0,
        max_cached_prompts: int = MAX_CACHED_PROMPTS,
        speculate: bool = True,
        context_tokens: int = CONTEXT_TOKENS,
        stale_budget: int = 0,
    ) -> None:
        started = time.perf_counter()
        #: Another engine on the same model and settings (`sibling`).
        self._another = functools.partial(
            QwenLlamaMTEngine,
            gguf,
            model_id=model_id,
            model_sha256=model_sha256,
            heads_dir=heads_dir,
            cache_dir=cache_dir,
            threads=threads,
            idle_threads=idle_threads,
            max_cached_prompts=max_cached_prompts,
            speculate=speculate,
            context_tokens=context_tokens,
            stale_budget=stale_budget,
        )
        # 0: every core (`dragoman mt-server`, where MT is all the server does); `dragoman serve`
        # passes each engine its share.
        self.threads = threads if threads > 0 else available_cores()
        # `idle_threads`: the threads of a decode while no other engine call computes
        # (`engines.llama_threads`): the interpreter's drafts borrow the speech front's core
        # between its steps.
        self._ctx = TappedContext(
            gguf, context_tokens=context_tokens, threads=self.threads, idle_threads=idle_threads
        )
        self.load_seconds = time.perf_counter() - started
        self.name = model_id
        self.model_path = gguf
        self.model_sha256 = model_sha256
        self.num_layers = self._ctx.n_layer
        self.num_heads = self._ctx.n_head
        self.speculate = speculate
        self._init_heads(heads_dir, cache_dir)
        self._cache = llama_draft.SequenceCache(self._ctx, max_cached_prompts, stale_budget)
        #: The tokens a translation never chooses, by target (built on first use; one model's
        #: vocabulary, so a sibling shares them).
        self.scripts = TargetScript(self._ctx.piece, self._ctx.n_vocab)
        self._init_prompts(self._ctx.tokenizer, self._cache.max_entries)
        self.compute_type = self._ctx.metadata.get("general.file_type", "gguf")
        log.info(
            "MT model loaded",
            model=model_id,
            backend="qwen-llama",
            threads=self._ctx.idle.describe(),
            cpu=cpu_info().describe(),
            kernels=self._ctx.backend.variant,
            seconds=round(self.load_seconds, 2),
        )

    def sibling(self) -> QwenLlamaMTEngine:
        """Another engine on the same model and settings, with a context of its own: the
        weights are shared (`engines.llama_models`), the KV cache and compute buffers are not;
        nor are the vocabulary masks built again (0.2-0.3 s each, at warm-up)."""
        engine: QwenLlamaMTEngine = self._another()
        engine.scripts = self.scripts
        return engine

    def warm_up(self) -> None:
        super().warm_up()
        self.scripts.prepare(direction.partition("-")[2] for direction in self.directions())

    @property
    def kernels(self) -> str:
        """The llama.cpp CPU variant this engine runs on (`engines.llama_backend`)."""
        return self._ctx.backend.variant

    def describe(self) -> EngineInfo:
        return EngineInfo(
            name=self.name,
            backend="qwen-llama",
            device="cpu",
            compute_type="gguf",
            compute_reason=(
                f"{self._ctx.backend.describe()}, {self.model_path.name}, {self._ctx.idle.describe()}, "
                f"stale budget {self._cache.stale_budget} tokens"
            ),
        )

    def _draft(
        self, request: MTRequest, prompt: Prompt, heads: list[tuple[int, int]] | None, limit: int
    ) -> MTDraft:
        final = request.mode is DraftMode.FINAL
        self._ctx.excluded = self.scripts.excluded(request.target_lang)
        self._ctx.lowercase_words = self.scripts.lowercase_words(request.target_lang)
        opens = prompt.target_start == len(prompt.ids)  # nothing of the translation yet
        self._ctx.excluded_after = (
            (len(prompt.ids) - 1, self.scripts.opening_quotes())
            if opens and not quoted(request.source_words)
            else None
        )
        with self._fresh_after_failure("draft"):
            return llama_draft.draft(
                self._ctx,
                self._cache,
                request.cache_key,
                prompt,
                heads,
                limit,
                speculate=self.speculate,
                frontier_word=None if final else request.frontier_word,
                past_frontier=request.past_frontier_tokens,
                on_pass=None if final else request.on_pass,
                wrap_up=None if final else request.wrap_up,
                # A final pass is exact: kept cells that missed the newest words made it
                # end the translation early (bench/RESULTS.md).
                insert=not final,
            )

    def _prefill(self, cache_key: str | None, prompt: Prompt) -> int:
        head = prompt.ids[: prompt.source_start]
        with self._fresh_after_failure("prefill"):
            cached = self._cache.reuse(cache_key, head)
            self._ctx.eval(head[cached:], len(head) - cached - 1, None)
            return len(head) - cached

    @contextlib.contextmanager
    def _fresh_after_failure(self, what: str) -> Iterator[None]:
        """A failure empties the cache, since the sequence may hold a half-fed batch: the next
        call starts from nothing. Anything but an EngineFailure becomes one."""
        try:
            yield
        except (EngineFailure, RuntimeError, ValueError, IndexError) as exc:
            self._cache.clear()
            if isinstance(exc, EngineFailure):
                raise
            raise EngineFailure(f"MT {what} failed: {exc}") from exc

    def _forget_cache(self, cache_key: str) -> None:
        self._cache.drop(cache_key)

    def measure_speed(self) -> SpeedSample:
        """This model's prefill and decode speed here (`model_choice.measure`); empties the cache."""
        # `auto` decides on the threads MT is sure to have, not those it borrows.
        with self._lock, self._ctx.idle.held():
            self._cache.clear()
            return measure(self._ctx, self._prompts.encode(probe_text()))

    def clear_cache(self) -> None:
        """Empty the sequence and drop every key's state: the next call is computed cold.
        (A forgotten key's tokens otherwise stay for any prompt that shares them.)"""
        with self._lock:
            self._cache.clear()

    def teacher_forced_attention(
        self, source_lang: str, target_lang: str, source_words: Sequence[str], target_text: str
    ) -> tuple[npt.NDArray[np.float32], list[int], list[tuple[int, int]]]:
        """Every head's attention from each target token to the source words, teacher-forced:
        as `QwenTorchMTEngine.teacher_forced_attention` (the same shapes and rows)."""
        prompt = self.build_prompt(source_lang, target_lang, source_words, target_text)
        target_ids = list(prompt.ids[prompt.target_start :])
        offsets = self._offsets(target_ids)
        if self._prompts.encode(target_text) != target_ids:
            raise EngineFailure("the target tokenizes differently inside the prompt")
        all_heads = [(layer, h) for layer in range(self.num_layers) for h in range(self.num_heads)]
        first = prompt.target_start - 1
        with self._lock:
            self._cache.reuse(None, prompt.ids[: first + 1])
            self._ctx.truncate(min(len(self._ctx.held), first))
            self._ctx.tap.set_heads(all_heads)
            try:
                held = len(self._ctx.held)
                _choices, captured = self._ctx.eval(
                    prompt.ids[held:], first - held, slice(prompt.source_start, prompt.source_end)
                )
            except EngineFailure:
                self._cache.clear()
                raise
        if captured is None:
            raise EngineFailure("no attention was captured")
        rows = captured[:, : len(target_ids), :] @ prompt.membership()  # [layers*heads, T, words]
        attention = rows.reshape(self.num_layers, self.num_heads, len(target_ids), -1).astype(np.float32)
        return attention, target_ids, offsets

    def _offsets(self, token_ids: Sequence[int]) -> list[tuple[int, int]]:
        """Each token's character span in the decoded text (for anchors)."""
        spans, data = [], b""
        for token in token_ids:
            start = len(data.decode("utf-8", errors="ignore"))
            data += self._ctx.piece(token)
            spans.append((start, len(data.decode("utf-8", errors="ignore"))))
        return spans

    # -- text ------------------------------------------------------------------------------

    def decode(self, token_ids: Sequence[int]) -> str:
        return b"".join(self._ctx.piece(int(t)) for t in token_ids).decode("utf-8", errors="replace")

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
            self._ctx.close()


def create(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """The registry's factory: the GGUF of `settings.preset`'s model, or of `mt.model` when set.

    `mt.model` is a packaged model name or a GGUF file; `mt.threads` (0: every core) and
    `mt.speculate` as for qwen-torch; `mt.stale_budget` for partial drafts (`llama_draft`).
    `mt.compute_type` does not apply: the GGUF's own quantisation is what runs. The preset `auto` (with no `mt.model`) loads the 1.5B,
    measures it and keeps it where it is fast enough, else loads the 0.5B
    (`engines.mt.model_choice`); the engine's `chosen_preset` says which.
    """
    if settings.preset == AUTO_PRESET and settings.model is None:
        engine = _create_auto(settings, cache_dir)
    else:
        engine = _create(str(settings.model or preset_model(settings.preset)), settings, cache_dir)
    return _with_lanes(engine, settings.lanes or auto_lanes(engine.threads))


def _with_lanes(engine: QwenLlamaMTEngine, count: int) -> MTEngine:
    """`engine`, or it and `count - 1` siblings as `MTLanes` (`engines.mt.lanes`)."""
    if count <= 1:
        return engine
    lanes: list[MTEngine] = [engine]
    try:
        lanes += [engine.sibling() for _ in range(count - 1)]
    except BaseException:
        for lane in lanes:
            lane.close()
        raise
    log.info("MT lanes", model=engine.name, lanes=count, threads=engine.threads)
    return MTLanes(lanes)


def _create(model: str, settings: MTSettings, cache_dir: Path) -> QwenLlamaMTEngine:
    from dragoman.engines.llama_amx import weights_for_kernels
    from dragoman.engines.torch_lm.files import model_id_for
    from dragoman.weights import MODELS, gguf_file, resolve

    path = gguf_file(resolve(model, cache_dir))
    if path.suffix != ".gguf":
        raise ConfigError(f"the qwen-llama backend runs GGUF files; {path} is not one")
    path = weights_for_kernels(path, cache_dir)
    spec = MODELS.get(model)
    sha = spec.files[0].sha256 if spec is not None and len(spec.files) == 1 else None
    return QwenLlamaMTEngine(
        path,
        model_id=model_id_for(model),
        model_sha256=sha,
        heads_dir=settings.heads_dir,
        cache_dir=cache_dir,
        threads=settings.threads,
        idle_threads=idle_threads_setting(settings.idle_threads),
        speculate=settings.speculate,
        stale_budget=settings.stale_budget,
    )


def _create_auto(settings: MTSettings, cache_dir: Path) -> QwenLlamaMTEngine:
    """`auto`: the 1.5B where installed and measured fast enough on this CPU, else the 0.5B."""
    installed = model_installed(QUALITY_MODEL, cache_dir)
    pick = pick_by_speed(
        QUALITY_MODEL,
        installed=installed,
        load=lambda model: _create(model, settings, cache_dir),
        memory_path=Path(cache_dir).expanduser() / SPEED_MEMORY_FILE,
        choose=lambda sample: choose_model(sample, quality_installed=installed),
        model_of=lambda choice: QUALITY_MODEL if choice.quality else DEFAULT_MODEL,
    )
    engine, sample = pick.engine, pick.sample
    engine.chosen_preset = "low_latency" if pick.choice.quality else "fast"
    log.info(
        "MT model chosen",
        preset=AUTO_PRESET,
        model=engine.name,
        chosen_preset=engine.chosen_preset,
        reason=pick.choice.reason,
        prefill_tok_s=None if sample is None else round(sample.prefill_tok_s, 1),
        decode_tok_s=None if sample is None else round(sample.decode_tok_s, 2),
        measured_now=describe(pick.measured),
        threads=engine.threads,
        measured_s=None if pick.measured is None else round(pick.measured.seconds, 2),
    )
    return engine
