"""One llama.cpp model with a one-sequence context, through llama-cpp-python's low-level API.

The high-level `Llama` class keeps one token history per context and generates
with one sampler for the whole reply; the voice agent needs more: swapping
conversations' KV caches in and out (`snapshot`/`restore`), cutting the sequence
back to any position, and switching to a grammar sampler in the middle of a reply
when a tool call begins. So the engine drives decode and sampling itself, through
the `llama_cpp._internals` wrappers for model and context and the C API for the rest.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import _internals

from dragoman.engines import llama_models
from dragoman.engines.llama_backend import load_backend
from dragoman.engines.workers import CancelToken
from dragoman.errors import EngineFailure

#: Prompt tokens per llama_decode call: cancellation is checked between chunks. Measured on
#: 2 cores, prefill ran at about 150 tok/s with chunks of 256 or 512 and lost a fifth at 128.
PREFILL_CHUNK = 256
#: The fewest tokens a prompt's last chunk holds. llama.cpp runs a one-token batch through other
#: kernels than a longer one, and the logits differ enough to flip a greedy choice: on a tools
#: prompt, the 0.5B called the tool after a whole prefill and answered in text after a cached one
#: whose last token went alone. With two tokens or more both gave the call.
MIN_LAST_CHUNK = 2
#: Sampling of a non-greedy reply (llama.cpp's defaults).
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05


class Sampler:
    """A llama.cpp sampler chain: optional grammar, then greedy or temperature sampling."""

    def __init__(
        self,
        runtime: LlamaRuntime,
        *,
        temperature: float,
        seed: int,
        grammar: str | None,
        banned: Sequence[int] = (),
    ) -> None:
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        self._chain = chain
        if banned:
            biases = (llama_cpp.llama_logit_bias * len(banned))()
            for slot, token in zip(biases, banned, strict=True):
                slot.token, slot.bias = token, float("-inf")
            llama_cpp.llama_sampler_chain_add(
                chain, llama_cpp.llama_sampler_init_logit_bias(runtime.n_vocab, len(banned), biases)
            )
        if grammar is not None:
            constrained = llama_cpp.llama_sampler_init_grammar(
                runtime.vocab, grammar.encode("utf-8"), b"root"
            )
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
        self._ctx = runtime.ctx

    def sample(self) -> int:
        """The next token from the last decoded position's logits; the chain accepts it."""
        return int(llama_cpp.llama_sampler_sample(self._chain, self._ctx, -1))

    def close(self) -> None:
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None


class LlamaRuntime:
    """A GGUF model and its context of `context_tokens`, all in sequence 0."""

    def __init__(self, path: Path, *, context_tokens: int, threads: int, batch: int = 512) -> None:
        self.backend = load_backend()
        #: Shared with any other engine on the same GGUF (`engines.llama_models`).
        self._model = llama_models.acquire(path)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context_tokens
        params.n_batch = params.n_ubatch = min(batch, context_tokens)
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = threads
        params.no_perf = True
        try:
            self._context = _internals.LlamaContext(model=self._model, params=params, verbose=False)
        except ValueError as exc:
            llama_models.release(self._model)
            raise EngineFailure(f"llama.cpp cannot create a context of {context_tokens} tokens") from exc
        self.ctx = self._context.ctx
        self.vocab = self._model.vocab
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.ctx))
        self.batch_size = int(params.n_batch)
        self.threads = threads
        self._batch = llama_cpp.llama_batch_init(self.batch_size, 0, 1)
        self.metadata = self._model.metadata()
        self.n_params = int(self._model.n_params())
        self.n_vocab = int(self._model.n_vocab())

    # -- vocabulary ---------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        """Tokens of a rendered prompt: special tokens written as text (`<|im_start|>`) are parsed."""
        return list(
            self._model.tokenize(text.encode("utf-8"), add_bos=self._model.add_bos_token(), special=True)
        )

    def tokenize_plain(self, text: str) -> list[int]:
        """Tokens of a piece of text inside a reply, with no BOS."""
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def piece(self, token: int) -> bytes:
        """The token's bytes as text; control tokens (`<|im_end|>`) are empty."""
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

    # -- the sequence ---------------------------------------------------------------------

    def decode(self, tokens: Sequence[int], start: int, cancel: CancelToken | None = None) -> int:
        """Put `tokens` at positions `start`.. of the sequence; returns how many went in.

        Fewer than all only when `cancel` was set between chunks. Logits are kept for the
        last token only: it is the one sampled from.
        """
        done = 0
        batch = self._batch
        while done < len(tokens):
            if cancel is not None and cancel.cancelled:
                break
            size = min(PREFILL_CHUNK, self.batch_size, len(tokens) - done)
            rest = len(tokens) - done - size
            if 0 < rest < MIN_LAST_CHUNK:
                size -= MIN_LAST_CHUNK - rest  # leave the last chunk enough tokens
            chunk = tokens[done : done + size]
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = start + done + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i == len(chunk) - 1
            code = llama_cpp.llama_decode(self.ctx, batch)
            if code != 0:
                raise EngineFailure(f"llama_decode returned {code} at position {start + done}")
            done += len(chunk)
        return done

    def truncate(self, length: int) -> None:
        """Keep positions 0..length-1 of the sequence."""
        llama_cpp.llama_memory_seq_rm(self.memory, 0, length, -1)

    def snapshot(self) -> bytearray:
        """The sequence's keys and values, to `restore` later."""
        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, 0))
        data = bytearray(size)
        buf = (ctypes.c_uint8 * size).from_buffer(data)
        written = int(llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, 0))
        if written != size:
            raise EngineFailure(f"llama.cpp wrote {written} of {size} bytes of sequence state")
        return data

    def restore(self, data: bytearray) -> None:
        """Replace the sequence with a `snapshot`."""
        self.truncate(0)
        buf = (ctypes.c_uint8 * len(data)).from_buffer(data)
        if int(llama_cpp.llama_state_seq_set_data(self.ctx, buf, len(data), 0)) == 0:
            self.truncate(0)
            raise EngineFailure("llama.cpp could not restore a conversation's KV cache")

    def sampler(
        self, *, temperature: float, seed: int, grammar: str | None = None, banned: Sequence[int] = ()
    ) -> Sampler:
        """Greedy at temperature 0; `banned` tokens are never sampled."""
        return Sampler(self, temperature=temperature, seed=seed, grammar=grammar, banned=banned)

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._model is not None:
            _close(self._context)
            llama_models.release(self._model)
            self._model = None


def _close(resource: Any) -> None:
    # llama-cpp-python leaves close() unannotated.
    resource.close()


class SpeedProbe:
    """`llama_speed.measure`'s view of a runtime: tokens in at the end of the sequence, the
    greedy next token out."""

    def __init__(self, runtime: LlamaRuntime) -> None:
        self._rt = runtime
        self.threads = runtime.threads
        self._length = 0
        self._greedy = runtime.sampler(temperature=0.0, seed=0)

    def eval(self, tokens: list[int], out_from: int, cols: slice | None) -> tuple[list[int], object]:
        self._length += self._rt.decode(tokens, self._length)
        return [self._greedy.sample()], None

    def truncate(self, length: int) -> None:
        self._rt.truncate(length)
        self._length = min(self._length, length)

    def close(self) -> None:
        self._greedy.close()
