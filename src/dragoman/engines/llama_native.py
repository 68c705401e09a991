"""The one adapter to llama-cpp-python's private and low-level API.

The engines need more than the high-level `Llama` class offers: several sequences
and their KV caches (snapshot, restore, cut, shift), logits of every row, sampler
chains switched mid-reply, and the attention scores of chosen layers. That takes
`llama_cpp._internals` (model and context wrappers), the raw C API (`llama_decode`,
`llama_memory_*`, `llama_state_seq_*`, samplers) and ggml's tensor calls through
ctypes. None of it is a stable interface, so all of it lives here, behind a small
typed surface: `NativeModel`, `NativeContext`, `Sampler`, `NodeFilter` and the tensor
helpers its callback uses. The rest of the project imports these, never `llama_cpp`'s
internals, and a new llama-cpp-python is checked against this module
(tests/engine/test_llama_native.py runs it on the pinned version).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import _internals

from dragoman.engines import _node_filter
from dragoman.engines.llama_backend import ggml_library, load_backend
from dragoman.errors import EngineFailure, ModelUnavailable

#: Sampling of a non-greedy reply (llama.cpp's defaults).
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05
#: ggml's type id of 32-bit floats (`GGML_TYPE_F32`).
GGML_TYPE_F32 = 0


def load_model(path: Path) -> NativeModel:
    """The GGUF model at `path`, on the CPU kernels `load_backend` picks (loaded first)."""
    load_backend()
    try:
        model = _internals.LlamaModel(
            path_model=str(path),
            params=llama_cpp.llama_model_default_params(),
            verbose=True,  # its quiet mode silences the whole process during the load (`llama_log`)
        )
    except ValueError as exc:
        raise ModelUnavailable(f"llama.cpp cannot load the GGUF model {path.name}: {exc}") from exc
    return NativeModel(model)


class NativeModel:
    """A loaded GGUF model: its vocabulary and facts. Contexts are made on it (`NativeContext`)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.vocab = model.vocab
        self.n_vocab = int(model.n_vocab())
        self.n_params = int(model.n_params())
        self.n_layer = int(llama_cpp.llama_model_n_layer(model.model))
        self.n_head = int(llama_cpp.llama_model_n_head(model.model))
        self.add_bos = bool(model.add_bos_token())
        self.metadata: dict[str, str] = dict(model.metadata())

    def tokenize(self, text: str, *, add_bos: bool) -> list[int]:
        """`text`'s tokens; special tokens written as text (`<|im_start|>`) are parsed."""
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

    def piece(self, token: int) -> bytes:
        """The token's bytes; control tokens (`<|im_end|>`) are empty."""
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, size, 0, False)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def token_text(self, token: int) -> str:
        return str(self._model.token_get_text(token))

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def close(self) -> None:
        self._model.close()


@dataclass(frozen=True)
class ContextSpec:
    """How a `NativeContext` is made."""

    context_tokens: int
    threads: int
    #: Tokens per `llama_decode` (n_batch = n_ubatch: one decode is one ubatch).
    batch: int = 512
    sequences: int = 1
    #: One KV stream for all sequences: copying between them moves no data.
    unified_kv: bool = False
    #: Off where the softmaxed attention must exist as a tensor; None: llama.cpp's default.
    flash_attention: bool | None = None


class NativeContext:
    """A llama.cpp context on a `NativeModel`: a KV cache of sequences, a batch, threads."""

    def __init__(self, model: NativeModel, spec: ContextSpec, node_filter: NodeFilter | None = None) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = spec.context_tokens
        params.n_batch = params.n_ubatch = min(spec.batch, spec.context_tokens)
        params.n_seq_max = spec.sequences
        if spec.unified_kv:
            params.kv_unified = True
        params.n_threads = params.n_threads_batch = spec.threads
        if spec.flash_attention is not None:
            params.flash_attn_type = (
                llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
                if spec.flash_attention
                else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
            )
        if node_filter is not None:
            params.cb_eval = node_filter.callback
            params.cb_eval_user_data = node_filter.user_data
        params.no_perf = True
        try:
            self._context: Any = _internals.LlamaContext(model=model._model, params=params, verbose=True)
        except ValueError as exc:
            raise EngineFailure(f"llama.cpp cannot create a context of {spec.context_tokens} tokens") from exc
        self.ctx = self._context.ctx
        self._memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.ctx))
        self.n_vocab = model.n_vocab
        self.batch_size = int(params.n_batch)
        self._batch: Any = llama_cpp.llama_batch_init(self.batch_size, 0, 1)

    def set_threads(self, threads: int) -> None:
        """The threads of the next `decode` calls (llama.cpp reads them at each graph compute)."""
        llama_cpp.llama_set_n_threads(self.ctx, threads, threads)

    @property
    def threads(self) -> tuple[int, int]:
        """llama.cpp's own threads of the context: (one-token decode, batch)."""
        return int(llama_cpp.llama_n_threads(self.ctx)), int(llama_cpp.llama_n_threads_batch(self.ctx))

    def decode(self, tokens: Sequence[int], start: int, seq: int, logits_from: int) -> None:
        """One `llama_decode` of `tokens` (at most `batch_size`) at positions `start`.. of
        `seq`, keeping the logits of rows `logits_from`.."""
        batch = self._batch
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = i >= logits_from
        code = llama_cpp.llama_decode(self.ctx, batch)
        if code != 0:
            raise EngineFailure(f"llama_decode returned {code} at position {start}")

    def logits(self, row: int) -> npt.NDArray[np.float32]:
        """The last decode's logits of `row` (a view, valid until the next decode)."""
        pointer = llama_cpp.llama_get_logits_ith(self.ctx, row)
        view: npt.NDArray[np.float32] = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
        return view

    # -- the KV cache -------------------------------------------------------------------

    def remove(self, seq: int, start: int, end: int = -1) -> None:
        """Drop positions start..end-1 of `seq` (-1: every sequence, or to the end)."""
        llama_cpp.llama_memory_seq_rm(self._memory, seq, start, end)

    def shift(self, seq: int, start: int, end: int, delta: int) -> None:
        """Move positions start..end-1 of `seq` by `delta` (keys re-rotated by llama.cpp)."""
        llama_cpp.llama_memory_seq_add(self._memory, seq, start, end, delta)

    def copy(self, source: int, target: int, start: int, end: int) -> None:
        """Let `target` see positions start..end-1 of `source` (the same cells)."""
        llama_cpp.llama_memory_seq_cp(self._memory, source, target, start, end)

    def clear(self) -> None:
        """Empty every sequence, and llama.cpp's cell search starts again from cell 0."""
        llama_cpp.llama_memory_clear(self._memory, False)

    def save(self, seq: int) -> bytearray:
        """`seq`'s keys and values, as llama.cpp serialises them."""
        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, seq))
        data = bytearray(size)
        buf = (ctypes.c_uint8 * size).from_buffer(data)
        written = int(llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, seq))
        if written != size:
            raise EngineFailure(f"llama.cpp wrote {written} of {size} bytes of sequence state")
        return data

    def load(self, seq: int, data: bytes | bytearray) -> bool:
        """Put a `save`d state into `seq` (emptied first by the caller); False if refused."""
        if isinstance(data, bytearray):
            buf = (ctypes.c_uint8 * len(data)).from_buffer(data)
        else:
            buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        return int(llama_cpp.llama_state_seq_set_data(self.ctx, buf, len(data), seq)) != 0

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self._context.close()


class Sampler:
    """A llama.cpp sampler chain: optional bans and grammar, then greedy or temperature sampling."""

    def __init__(
        self,
        model: NativeModel,
        context: NativeContext,
        *,
        temperature: float,
        seed: int,
        grammar: str | None,
        banned: Sequence[int] = (),
    ) -> None:
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        self._chain: Any = chain
        if banned:
            biases = (llama_cpp.llama_logit_bias * len(banned))()
            for slot, token in zip(biases, banned, strict=True):
                slot.token, slot.bias = token, float("-inf")
            llama_cpp.llama_sampler_chain_add(
                chain, llama_cpp.llama_sampler_init_logit_bias(model.n_vocab, len(banned), biases)
            )
        if grammar is not None:
            constrained = llama_cpp.llama_sampler_init_grammar(model.vocab, grammar.encode("utf-8"), b"root")
            if not constrained:
                self.close()
                raise EngineFailure("llama.cpp rejected the tool-call grammar")
            llama_cpp.llama_sampler_chain_add(chain, constrained)
        if temperature <= 0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            for stage in (
                llama_cpp.llama_sampler_init_top_k(TOP_K),
                llama_cpp.llama_sampler_init_top_p(TOP_P, 1),
                llama_cpp.llama_sampler_init_min_p(MIN_P, 1),
                llama_cpp.llama_sampler_init_temp(temperature),
                llama_cpp.llama_sampler_init_dist(seed),
            ):
                llama_cpp.llama_sampler_chain_add(chain, stage)
        self._ctx = context.ctx

    def sample(self) -> int:
        """The next token from the last decoded position's logits; the chain accepts it."""
        return int(llama_cpp.llama_sampler_sample(self._chain, self._ctx, -1))

    def close(self) -> None:
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None


# -- ggml tensors, for an eval callback ----------------------------------------------------


#: NODE_FILTER_PREFIX and NODE_FILTER_NUMBERS of node_filter.c.
_FILTER_PREFIX_BYTES, _FILTER_NUMBERS = 64, 1024


class _NodeFilterConfig(ctypes.Structure):
    """`struct node_filter` of node_filter.c, field for field."""

    _fields_ = [
        ("get_name", ctypes.c_void_p),
        ("computed", ctypes.c_void_p),
        ("computed_user_data", ctypes.c_void_p),
        ("armed", ctypes.c_int32),
        ("prefix", ctypes.c_char * _FILTER_PREFIX_BYTES),
        ("wanted", ctypes.c_uint8 * _FILTER_NUMBERS),
    ]


class NodeFilter:
    """A context's eval callback that hands Python only the nodes it wants, once computed.

    llama.cpp asks `cb_eval` about every node of every graph, then calls it for the
    nodes answered yes once they are computed. The questions are answered in C
    (`_node_filter`, built from node_filter.c): a node is wanted when its name is
    `prefix` followed by one of the numbers `select` names (the layer of
    `kq_soft_max-L`). Only those reach `on_computed(tensor)` (False stops the
    graph), so a draft never waits for the GIL node by node. Pass the filter to
    `NativeContext` and keep it alive as long as the context.
    """

    def __init__(self, prefix: bytes, on_computed: Callable[[int], bool]) -> None:
        if _node_filter.config_size() != ctypes.sizeof(_NodeFilterConfig):
            raise EngineFailure(
                "the node filter's C struct and its ctypes mirror differ; rebuild the package"
            )
        if len(prefix) >= _FILTER_PREFIX_BYTES:
            raise ValueError(f"node name prefix too long: {prefix!r}")
        self._on_computed = llama_cpp.ggml_backend_sched_eval_callback(
            lambda tensor, _ask, _user_data: on_computed(tensor)
        )
        self._config = _NodeFilterConfig()
        self._config.get_name = ctypes.cast(_ggml().ggml_get_name, ctypes.c_void_p).value
        self._config.computed = ctypes.cast(self._on_computed, ctypes.c_void_p).value
        self._config.prefix = prefix
        self.callback: Any = ctypes.cast(
            _node_filter.callback_address(), llama_cpp.ggml_backend_sched_eval_callback
        )
        self.user_data = ctypes.addressof(self._config)
        self._selected: frozenset[int] = frozenset()

    def select(self, numbers: Iterable[int]) -> None:
        """Want the nodes of these numbers from the next graph on; none: the graph runs in one go."""
        wanted = frozenset(numbers)
        if any(not 0 <= n < _FILTER_NUMBERS for n in wanted):
            raise ValueError(f"node numbers out of range: {sorted(wanted)}")
        for n in self._selected - wanted:
            self._config.wanted[n] = 0
        for n in wanted - self._selected:
            self._config.wanted[n] = 1
        self._selected = wanted
        self._config.armed = bool(wanted)


class _TensorHead(ctypes.Structure):
    """The leading fields of `struct ggml_tensor` (ggml.h), stable across ggml versions."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
    ]


@dataclass(frozen=True)
class TensorLayout:
    """A ggml tensor's element type, sizes (`ne`) and strides in bytes (`nb`), innermost first."""

    type: int
    ne: tuple[int, int, int, int]
    nb: tuple[int, int, int, int]


@functools.cache
def _ggml() -> Any:
    lib = ggml_library()
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.restype = None
    lib.ggml_backend_tensor_get.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
    ]
    return lib


def tensor_name(tensor: int) -> bytes:
    name: bytes = _ggml().ggml_get_name(tensor)
    return name


def tensor_layout(tensor: int) -> TensorLayout:
    head = _TensorHead.from_address(tensor)
    return TensorLayout(
        int(head.type),
        (int(head.ne[0]), int(head.ne[1]), int(head.ne[2]), int(head.ne[3])),
        (int(head.nb[0]), int(head.nb[1]), int(head.nb[2]), int(head.nb[3])),
    )


def read_tensor(tensor: int, out: npt.NDArray[Any], offset: int) -> None:
    """Fill the contiguous array `out` with the tensor's bytes from `offset`."""
    _ggml().ggml_backend_tensor_get(tensor, out.ctypes.data, offset, out.nbytes)
