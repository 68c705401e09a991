"""The default MT backend: a Qwen2.5 instruct model on PyTorch, with alignment-head attention.

llama.cpp exposes no attention, so AlignAtt runs the model in transformers with
eager attention and reads the weights of the calibrated alignment heads
(`mt_heads`) through forward hooks on those layers only.

Loading. The packaged model is a Q4_K_M GGUF. Dequantising it with transformers
takes about a minute, so the first load converts it once into a transformers
folder (bf16 safetensors plus the tokenizer) under
`<cache_dir>/models/<name>-hf` and later loads read that folder in seconds. bf16
because on this CPU (AVX512-BF16) its prefill measured about 4x the fp32 rate,
with the same translations. A user's own transformers folder or GGUF file works
as the model too.

Prompt. The model's chat template, with the instruction and the context before
the source and only the fixed end of the user turn and the assistant header
after it, then the accepted target prefix:

    <system: translator; context (never translated)>
    <history: user "Translate ... English: src" / assistant "tgt"> ...
    <user: "Translate the following English text into German. ... English:" w1 w2 ... wn>
    <assistant: target_prefix ...

Every source word is tokenized on its own (" " + word; byte-level BPE never
merges across a space), so each word's token span is known and appending a word
changes the prompt only from the end of the source on. The KV cache of the
longest common token prefix with the previous prompt of the same `cache_key` is
reused, so an update computes its new source tokens, the ~5-token assistant
header, the target prefix and the draft.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import tempfile
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
from dragoman.engines import mt_heads
from dragoman.engines.mt import DraftMode, MTDraft, MTEngine, MTRequest
from dragoman.engines.mt_presets import DEFAULT_MODEL, PRESETS, QUALITY_MODEL, QUALITY_MODEL_PACKAGES
from dragoman.errors import ClientError, ConfigError, EngineFailure, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Language names for the instruction; other codes are used as they are.
LANGUAGE_NAMES: Mapping[str, str] = {
    "ar": "Arabic",
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "hi": "Hindi",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}
#: Source languages written without spaces between words.
UNSEGMENTED_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my"})

#: Bumped when the prompt changes, since calibrated heads were chosen under it.
PROMPT_VERSION = 1
#: Utterances whose KV caches are kept (least recently used dropped first).
MAX_CACHED_PROMPTS = 8
#: Written last into a converted folder; its presence means the conversion finished.
CONVERSION_STAMP = "dragoman-conversion.json"
#: Longest FINAL pass when the request asks for less: about two target tokens per source token.
FINAL_TOKENS_PER_SOURCE_TOKEN = 2

_SOURCE_MARK = "\ue000SOURCE\ue000"


def default_threads() -> int:
    """Half the cores, at least one: the MT engine shares the CPU with the ASR engine.

    Measured on 2 shared cores: with other processes busy, 2 torch threads decoded
    at 0.3 tok/s (OpenMP threads spinning against each other) and 1 thread at 7.6.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    return max(1, cores // 2)


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code.split("-")[0].lower(), code)


# -- model files ---------------------------------------------------------------------------


def _is_hf_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def model_id_for(model: str) -> str:
    """The name heads files are filed under: the packaged name, else the folder or file stem."""
    from dragoman import weights

    if model in weights.MODELS or model == QUALITY_MODEL:
        return model
    path = Path(model).expanduser()
    return path.stem if path.suffix == ".gguf" else path.resolve().name


def prepare_model(model: str, cache_dir: Path) -> tuple[Path, str, str | None]:
    """The transformers folder to load for `model`, its id (heads folder name) and sha256.

    `model` is a packaged model name (resolved with `dragoman.weights.resolve`), a
    transformers folder, or a GGUF file; a GGUF is converted once into the cache.
    """
    from dragoman import weights

    spec = weights.MODELS.get(model)
    if spec is None and model == QUALITY_MODEL:
        raise ModelUnavailable(
            f"model {model!r} is not installed; it needs the packages {QUALITY_MODEL_PACKAGES}"
        )
    sha = spec.files[0].sha256 if spec is not None and len(spec.files) == 1 else None
    converted = Path(cache_dir).expanduser() / "models" / f"{model}-hf"
    if spec is not None and (converted / CONVERSION_STAMP).is_file():
        # Converted earlier: no need to re-verify the hundreds of MB of GGUF.
        return converted, model, sha
    path = weights.resolve(model, Path(cache_dir))
    model_id = model_id_for(model)
    if _is_hf_folder(path):
        return path, model_id, sha
    if path.is_file() and path.suffix == ".gguf":
        if spec is None:
            stat = path.stat()
            tag = hashlib.sha256(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:10]
            converted = Path(cache_dir).expanduser() / "models" / f"{model_id}-{tag}-hf"
        if not (converted / CONVERSION_STAMP).is_file():
            convert_gguf(path, converted)
        return converted, model_id, sha
    raise ConfigError(f"MT model {model!r}: {path} is neither a transformers folder nor a .gguf file")


def convert_gguf(gguf: Path, out_dir: Path, dtype: str = "bfloat16") -> Path:
    """Dequantise a GGUF into a transformers folder (safetensors + tokenizer), atomically.

    transformers' own `from_pretrained(gguf_file=...)` needs `accelerate`; its GGUF
    reader (`load_gguf_checkpoint`) does not, so the model is built from the GGUF's
    config and the dequantised tensors are loaded into it.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint as _load

    load_gguf_checkpoint: Any = _load
    auto_model: Any = AutoModelForCausalLM

    started = time.perf_counter()
    log.info("converting GGUF model for transformers (once)", gguf=gguf.name, out=str(out_dir))
    torch_dtype = getattr(torch, dtype)
    try:
        config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = auto_model.from_config(config, dtype=torch_dtype)
        tensors = load_gguf_checkpoint(
            str(gguf), return_tensors=True, model_to_load=model, torch_dtype=torch_dtype
        )["tensors"]
        result = model.load_state_dict(tensors, strict=False)
        # Buffers (rotary frequencies) are not in the file; any missing parameter is.
        missing = [k for k in result.missing_keys if k in dict(model.named_parameters())]
        if missing and not (missing == ["lm_head.weight"] and config.tie_word_embeddings):
            raise ValueError(f"weights missing from the GGUF: {missing[:5]}")
    except (OSError, ValueError, KeyError, RuntimeError, NotImplementedError) as exc:
        raise ModelUnavailable(f"cannot convert GGUF model {gguf.name}: {exc}") from exc
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        stamp = f'{{"source": "{gguf.name}", "size": {gguf.stat().st_size}, "dtype": "{dtype}"}}\n'
        (tmp / CONVERSION_STAMP).write_text(stamp, encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        if out_dir.exists() and not (out_dir / CONVERSION_STAMP).is_file():
            shutil.rmtree(out_dir)  # a conversion that died half-way
        try:
            os.replace(tmp, out_dir)
        except OSError:
            # Another process finished the same conversion first: use its copy.
            if not (out_dir / CONVERSION_STAMP).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("GGUF model converted", seconds=round(time.perf_counter() - started, 1), out=str(out_dir))
    return out_dir


# -- prompt --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """Token ids of a prompt and where its parts are."""

    ids: list[int]
    #: [start, end) token span of each source word; empty for a word with no tokens.
    word_spans: list[tuple[int, int]]
    #: Index of the first source token and one past the last.
    source_start: int
    source_end: int
    #: Index of the first target-prefix token (the end of the assistant header).
    target_start: int

    def membership(self) -> npt.NDArray[np.float32]:
        """[source tokens, words] 0/1 matrix that sums token attention into word attention."""
        matrix = np.zeros((self.source_end - self.source_start, len(self.word_spans)), dtype=np.float32)
        for word, (start, end) in enumerate(self.word_spans):
            matrix[start - self.source_start : end - self.source_start, word] = 1.0
        return matrix


@dataclass
class _CacheEntry:
    #: Tokens whose keys and values `kv` holds, in order.
    ids: list[int]
    kv: Any


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
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        auto_model: Any = AutoModelForCausalLM
        torch.set_num_threads(threads if threads > 0 else default_threads())
        started = time.perf_counter()
        try:
            self._tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
            # Eager attention: the alignment heads' weights are read from it (sdpa returns none).
            self._model: Any = auto_model.from_pretrained(
                str(model_dir), dtype=torch.bfloat16, attn_implementation="eager", local_files_only=True
            )
            self._model.eval()
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelUnavailable(f"cannot load the MT model in {model_dir}: {exc}") from exc
        self.load_seconds = time.perf_counter() - started
        self.name = model_id
        self.model_dir = model_dir
        self.model_sha256 = model_sha256
        self._heads_dirs = mt_heads.search_dirs(heads_dir, cache_dir)
        self._heads: dict[str, mt_heads.HeadsFile] = {}
        self.final_max_new_tokens = final_max_new_tokens
        self._max_cached = max(1, max_cached_prompts)
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
        #: Token ids of recent prompt heads (system, history, instruction), by text.
        self._head_ids: dict[str, list[int]] = {}
        log.info("MT model loaded", model=model_id, seconds=round(self.load_seconds, 2))

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

    def _encode(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _frame(
        self, source_lang: str, target_lang: str, context_text: str | None, history: Sequence[tuple[str, str]]
    ) -> tuple[str, list[int]]:
        """The chat-template text after the source and the token ids before it (memoised)."""
        src, tgt = language_name(source_lang), language_name(target_lang)
        system = "You are a professional translator."
        if context_text and context_text.strip():
            system += (
                "\n\nBackground for the conversation (for reference only; never translate it):\n"
                + context_text.strip()
            )

        def ask(text: str) -> str:
            return f"Translate the following {src} text into {tgt}. Output only the {tgt} translation.\n\n{src}:{text}"

        sep = "" if source_lang.split("-")[0].lower() in UNSEGMENTED_LANGS else " "
        messages = [{"role": "system", "content": system}]
        for source, target in history:
            messages.append({"role": "user", "content": ask(sep + source.strip())})
            messages.append({"role": "assistant", "content": target.strip()})
        messages.append({"role": "user", "content": ask(_SOURCE_MARK)})
        text: str = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        head, mark, tail = text.partition(_SOURCE_MARK)
        if not mark or _SOURCE_MARK in tail:
            raise EngineFailure("the chat template mangled the source marker")
        ids = self._head_ids.get(head)
        if ids is None:
            if len(self._head_ids) >= 4 * self._max_cached:
                self._head_ids.clear()
            ids = self._head_ids[head] = self._encode(head)
        return tail, ids

    def build_prompt(
        self,
        source_lang: str,
        target_lang: str,
        source_words: Sequence[str],
        target_prefix: str = "",
        context_text: str | None = None,
        history: Sequence[tuple[str, str]] = (),
    ) -> Prompt:
        tail, head_ids = self._frame(source_lang, target_lang, context_text, history)
        sep = "" if source_lang.split("-")[0].lower() in UNSEGMENTED_LANGS else " "
        ids = list(head_ids)
        source_start = len(ids)
        spans: list[tuple[int, int]] = []
        for word in source_words:
            word = word.strip()
            start = len(ids)
            if word:
                ids.extend(self._encode(sep + word))
            spans.append((start, len(ids)))
        source_end = len(ids)
        ids.extend(self._encode(tail))
        target_start = len(ids)
        if target_prefix:
            ids.extend(self._encode(target_prefix))
        return Prompt(ids, spans, source_start, source_end, target_start)

    # -- caches ----------------------------------------------------------------------------

    def _new_kv(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self._model.config)
        except TypeError:  # transformers 4.x
            return DynamicCache()

    def _reuse(self, cache_key: str | None, ids: Sequence[int]) -> tuple[Any, int]:
        """A KV cache holding a prefix of `ids` and that prefix's length (< len(ids))."""
        entry = self._caches.pop(cache_key, None) if cache_key is not None else None
        if entry is None:
            return self._new_kv(), 0
        # The last prompt token is always fed: its logits give the first drafted token.
        keep = min(_common_prefix(entry.ids, ids), len(ids) - 1)
        held = int(entry.kv.get_seq_length())
        if held != len(entry.ids):
            return self._new_kv(), 0
        if keep < held:
            entry.kv.crop(keep - held)  # negative: drop that many trailing positions
        return entry.kv, keep

    def _store(self, cache_key: str | None, ids: list[int], kv: Any) -> None:
        if cache_key is None:
            return
        self._caches[cache_key] = _CacheEntry(ids, kv)
        self._caches.move_to_end(cache_key)
        while len(self._caches) > self._max_cached:
            self._caches.popitem(last=False)

    def forget(self, cache_key: str) -> None:
        with self._lock:
            self._caches.pop(cache_key, None)

    # -- attention capture -----------------------------------------------------------------

    @contextmanager
    def _tap(
        self, heads: Sequence[tuple[int, int]], cols: slice, last_row_only: bool
    ) -> Iterator[dict[int, Any]]:
        """Record the selected heads' attention weights over key positions `cols` per layer.

        Yields {layer: tensor [heads of that layer, rows, cols]} refreshed on every forward.
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
                rows = weights[0, index, -1:, cols] if last_row_only else weights[0, index, :, cols]
                captured[layer] = rows.float()

            return hook

        try:
            for layer in by_layer:
                handles.append(self._layers[layer].self_attn.register_forward_hook(hook_for(layer)))
            yield captured
        finally:
            for handle in handles:
                handle.remove()

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
                return self._decode_loop(request.cache_key, prompt, heads, limit)
            except (RuntimeError, ValueError, IndexError) as exc:
                if request.cache_key is not None:
                    self._caches.pop(request.cache_key, None)
                raise EngineFailure(f"MT draft failed: {exc}") from exc

    def _decode_loop(
        self, cache_key: str | None, prompt: Prompt, heads: Sequence[tuple[int, int]] | None, limit: int
    ) -> MTDraft:
        import torch

        started = time.perf_counter()
        kv, keep = self._reuse(cache_key, prompt.ids)
        fed = list(prompt.ids[:keep])
        pending = list(prompt.ids[keep:])
        tokens: list[int] = []
        rows: list[npt.NDArray[np.float32]] = []
        finished = False
        cols = slice(prompt.source_start, prompt.source_end)
        membership = torch.from_numpy(prompt.membership())
        prefill_ms = 0.0
        with torch.inference_mode(), self._tap(heads or [], cols, last_row_only=True) as captured:
            while True:
                out = self._forward(pending, kv)
                fed.extend(pending)
                if not prefill_ms:
                    prefill_ms = (time.perf_counter() - started) * 1000.0
                if heads:
                    rows.append(self._word_row(captured, membership))
                token = int(out.logits[0, -1].argmax())
                if token in self._stop_ids:
                    finished = True
                    if heads:
                        rows.pop()  # the row that chose end-of-sequence belongs to no token
                    break
                tokens.append(token)
                if len(tokens) >= limit:
                    break
                pending = [token]
        self._store(cache_key, fed, kv)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        attention = None
        if heads is not None:
            attention = (
                np.stack(rows).astype(np.float32)
                if rows
                else np.zeros((0, len(prompt.word_spans)), dtype=np.float32)
            )
        computed = len(prompt.ids) - keep + len(tokens)
        return MTDraft(
            token_ids=tokens,
            attention=attention,
            finished=finished,
            computed_tokens=computed,
            extra={
                "engine_ms": elapsed_ms,
                "prefill_ms": prefill_ms,
                "prompt_tokens": float(len(prompt.ids)),
                "cached_tokens": float(keep),
            },
        )

    @staticmethod
    def _word_row(captured: Mapping[int, Any], membership: Any) -> npt.NDArray[np.float32]:
        """Mean over heads of each head's attention over source words, normalised per head.

        Per-head normalisation keeps a head that spends most of its weight on the
        attention sink (the first token) from being outvoted by one that does not.
        """
        import torch

        per_head = torch.cat([captured[layer][:, -1, :] for layer in sorted(captured)], dim=0) @ membership
        per_head = per_head / per_head.sum(dim=1, keepdim=True).clamp_min(1e-9)
        row: npt.NDArray[np.float32] = per_head.mean(dim=0).numpy().astype(np.float32)
        return row

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
        with self._lock, torch.inference_mode(), self._tap(all_heads, cols, last_row_only=False) as captured:
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


def create(settings: MTSettings, cache_dir: Path) -> MTEngine:
    """The registry's factory: the model of `settings.preset`, or `mt.model` when set.

    Reads `mt.model` and `mt.threads` when the settings have them (optional fields).
    """
    preset = PRESETS.get(settings.preset)
    if preset is None:
        raise ConfigError(f"unknown MT preset {settings.preset!r}; presets: {', '.join(sorted(PRESETS))}")
    model = str(getattr(settings, "model", None) or preset.model or DEFAULT_MODEL)
    model_dir, model_id, sha = prepare_model(model, cache_dir)
    return QwenTorchMTEngine(
        model_dir,
        model_id=model_id,
        model_sha256=sha,
        heads_dir=settings.heads_dir,
        cache_dir=cache_dir,
        threads=int(getattr(settings, "threads", 0) or 0),
        final_max_new_tokens=preset.final_max_new_tokens,
    )
