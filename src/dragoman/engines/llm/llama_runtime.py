"""One llama.cpp model with a one-sequence context, through llama-cpp-python's low-level API.

The high-level `Llama` class keeps one token history per context and generates
with one sampler for the whole reply; the voice agent needs more: swapping
conversations' KV caches in and out (`snapshot`/`restore`), cutting the sequence
back to any position, and switching to a grammar sampler in the middle of a reply
when a tool call begins. So the engine drives decode and sampling itself, through
the low-level API's adapter (`engines.llama_native`).

Threads: the runtime decodes on `threads`, and on `idle_threads` (more) whenever no other
engine call of the process computes, checked before every llama_decode (`engines.llama_threads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dragoman.engines.llama_models import ModelContext
from dragoman.engines.llama_native import ContextSpec, Sampler
from dragoman.engines.llama_threads import IdleThreads
from dragoman.engines.workers import CancelToken
from dragoman.errors import EngineFailure

__all__ = ["MIN_LAST_CHUNK", "PREFILL_CHUNK", "LlamaRuntime", "Sampler", "SpeedProbe"]

#: Prompt tokens per llama_decode call: cancellation is checked between chunks. Measured on
#: 2 cores, prefill ran at about 150 tok/s with chunks of 256 or 512 and lost a fifth at 128.
PREFILL_CHUNK = 256
#: The fewest tokens a prompt's last chunk holds. llama.cpp runs a one-token batch through other
#: kernels than a longer one, and the logits differ enough to flip a greedy choice: on a tools
#: prompt, the 0.5B called the tool after a whole prefill and answered in text after a cached one
#: whose last token went alone. With two tokens or more both gave the call.
MIN_LAST_CHUNK = 2
#: The one sequence.
_SEQ = 0


class LlamaRuntime:
    """A GGUF model and its context of `context_tokens`, all in sequence 0."""

    def __init__(
        self, path: Path, *, context_tokens: int, threads: int, idle_threads: int = 0, batch: int = 512
    ) -> None:
        #: On the model any other engine on the same GGUF shares (`engines.llama_models`).
        self._loaded = ModelContext(
            path, ContextSpec(context_tokens=context_tokens, threads=threads, batch=batch)
        )
        self.backend = self._loaded.backend
        self._model, self._context = self._loaded.model, self._loaded.context
        self.n_ctx = self._context.n_ctx
        self.batch_size = self._context.batch_size
        self.threads = threads
        #: `threads`, or `idle_threads` while no other engine call computes.
        self.idle = IdleThreads(self._context.set_threads, threads, idle_threads)
        self.metadata = self._model.metadata
        self.n_params = self._model.n_params
        self.n_vocab = self._model.n_vocab

    # -- vocabulary ---------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        """Tokens of a rendered prompt: special tokens written as text (`<|im_start|>`) are parsed."""
        return self._model.tokenize(text, add_bos=self._model.add_bos)

    def tokenize_plain(self, text: str) -> list[int]:
        """Tokens of a piece of text inside a reply, with no BOS."""
        return self._model.tokenize(text, add_bos=False)

    def piece(self, token: int) -> bytes:
        """The token's bytes as text; control tokens (`<|im_end|>`) are empty."""
        return self._model.piece(token)

    def token_text(self, token: int) -> str:
        return self._model.token_text(token)

    def is_eog(self, token: int) -> bool:
        return self._model.is_eog(token)

    # -- the sequence ---------------------------------------------------------------------

    def decode(self, tokens: Sequence[int], start: int, cancel: CancelToken | None = None) -> int:
        """Put `tokens` at positions `start`.. of the sequence; returns how many went in.

        Fewer than all only when `cancel` was set between chunks. Logits are kept for the
        last token only: it is the one sampled from.
        """
        done = 0
        while done < len(tokens):
            if cancel is not None and cancel.cancelled:
                break
            size = min(PREFILL_CHUNK, self.batch_size, len(tokens) - done)
            rest = len(tokens) - done - size
            if 0 < rest < MIN_LAST_CHUNK:
                size -= MIN_LAST_CHUNK - rest  # leave the last chunk enough tokens
            chunk = tokens[done : done + size]
            self.idle.before_decode()
            self._context.decode(chunk, start + done, _SEQ, len(chunk) - 1)
            done += len(chunk)
        return done

    @property
    def context_threads(self) -> tuple[int, int]:
        """The threads llama.cpp decodes on now (one token, a batch), as it reports them."""
        return self._context.threads

    def truncate(self, length: int) -> None:
        """Keep positions 0..length-1 of the sequence."""
        self._context.remove(_SEQ, length)

    def snapshot(self) -> bytearray:
        """The sequence's keys and values, to `restore` later."""
        return self._context.save(_SEQ)

    def restore(self, data: bytearray) -> None:
        """Replace the sequence with a `snapshot`."""
        self.truncate(0)
        if not self._context.load(_SEQ, data):
            self.truncate(0)
            raise EngineFailure("llama.cpp could not restore a conversation's KV cache")

    def sampler(
        self, *, temperature: float, seed: int, grammar: str | None = None, banned: Sequence[int] = ()
    ) -> Sampler:
        """Greedy at temperature 0; `banned` tokens are never sampled."""
        return Sampler(
            self._model, self._context, temperature=temperature, seed=seed, grammar=grammar, banned=banned
        )

    def close(self) -> None:
        self._loaded.close()


class SpeedProbe:
    """`llama_speed.measure`'s view of a runtime: tokens in at the end of the sequence, the
    greedy next token out."""

    def __init__(self, runtime: LlamaRuntime) -> None:
        self._rt = runtime
        self.threads = runtime.threads
        self._length = 0
        self._greedy = runtime.sampler(temperature=0.0, seed=0)

    def eval(self, tokens: list[int], out_from: int, cols: slice | None) -> tuple[list[int], object]:
        with self._rt.idle.held():  # `auto` decides on the threads the agent is sure to have
            self._length += self._rt.decode(tokens, self._length)
        return [self._greedy.sample()], None

    def truncate(self, length: int) -> None:
        self._rt.truncate(length)
        self._length = min(self._length, length)

    def close(self) -> None:
        self._greedy.close()
