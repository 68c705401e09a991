"""A GGUF model in llama.cpp with one sequence, greedy choices per row and attention taps.

Through llama-cpp-python's low-level API: the high-level `Llama` keeps logits of
one row and knows no eval callback. Flash attention is off, since with it the
softmaxed scores never exist as a tensor (`engines.mt.llama_tap`).

The vocabulary of the GGUF is also the prompt tokenizer (`GGUFTokenizer`), with the
chat template stored in the file: the prompts are token for token those of the
torch engine, whose tokenizer transformers builds from the same file.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals
from llama_cpp._logger import set_verbose

from dragoman.engines.llama_backend import load_backend
from dragoman.engines.mt.llama_tap import AttentionTap
from dragoman.errors import EngineFailure, ModelUnavailable


class GGUFTokenizer:
    """The two calls `PromptBuilder` makes of a transformers tokenizer, on llama.cpp's vocabulary."""

    def __init__(self, model: Any, chat_template: str) -> None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self._model = model
        # As transformers renders chat templates: blocks trimmed, an exception hook, tojson.
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message: str) -> None:
            raise EngineFailure(f"chat template: {message}")

        env.globals["raise_exception"] = raise_exception
        self._template = env.from_string(chat_template)

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        # Special tokens written as text (<|im_start|>) are parsed, as transformers does.
        ids = self._model.tokenize(text.encode("utf-8"), add_bos=add_special_tokens, special=True)
        return {"input_ids": list(ids)}

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, str]],
        tokenize: bool = False,
        add_generation_prompt: bool = True,
    ) -> str:
        if tokenize:
            raise ValueError("GGUFTokenizer renders text only")
        text: str = self._template.render(
            messages=list(messages), add_generation_prompt=add_generation_prompt
        )
        return text


class TappedContext:
    """One llama.cpp context of `context_tokens`, sequence 0 only, with an `AttentionTap`."""

    def __init__(self, path: Path, *, context_tokens: int, threads: int, batch: int = 512) -> None:
        set_verbose(False)  # llama.cpp logs every load to stderr otherwise
        self.backend = load_backend()
        try:
            self._model = _internals.LlamaModel(
                path_model=str(path), params=llama_cpp.llama_model_default_params(), verbose=False
            )
        except ValueError as exc:
            raise ModelUnavailable(f"llama.cpp cannot load the GGUF model {path}: {exc}") from exc
        self.tap = AttentionTap()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context_tokens
        # n_batch = n_ubatch: one llama_decode is one ubatch, which the tap relies on.
        params.n_batch = params.n_ubatch = min(batch, context_tokens)
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = threads
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.cb_eval = self.tap.callback
        params.cb_eval_user_data = None
        params.no_perf = True
        try:
            self._context = _internals.LlamaContext(model=self._model, params=params, verbose=False)
        except ValueError as exc:
            _close(self._model)
            raise EngineFailure(f"llama.cpp cannot create a context of {context_tokens} tokens") from exc
        self.ctx = self._context.ctx
        self.vocab = self._model.vocab
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.ctx))
        self.batch_size = int(params.n_batch)
        self.threads = threads
        self.n_vocab = int(self._model.n_vocab())
        self.n_layer = int(llama_cpp.llama_model_n_layer(self._model.model))
        self.n_head = int(llama_cpp.llama_model_n_head(self._model.model))
        self.metadata: dict[str, str] = dict(self._model.metadata())
        self._batch = llama_cpp.llama_batch_init(self.batch_size, 0, 1)
        template = self.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailable(f"{path.name} has no chat template")
        self.tokenizer = GGUFTokenizer(self._model, template)
        #: Tokens the sequence holds, position by position.
        self.held: list[int] = []

    # -- vocabulary ---------------------------------------------------------------------

    def piece(self, token: int) -> bytes:
        """The token's bytes; control tokens (<|im_end|>) are empty."""
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, size, 0, False)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    # -- the sequence ---------------------------------------------------------------------

    def eval(
        self, tokens: Sequence[int], out_from: int, cols: slice | None
    ) -> tuple[list[int], np.ndarray[Any, np.dtype[np.float32]] | None]:
        """Append `tokens` to the sequence; the greedy choice after each of `tokens[out_from:]`.

        With `cols`, also the tapped heads' attention of those rows over cells `cols`,
        [heads, rows, cols].
        """
        if len(self.held) + len(tokens) > self.n_ctx:
            raise EngineFailure(f"the prompt and draft exceed the context of {self.n_ctx} tokens")
        choices: list[int] = []
        parts = []
        batch = self._batch
        done = 0
        while done < len(tokens):
            chunk = tokens[done : done + self.batch_size]
            first_out = max(0, out_from - done)
            batch.n_tokens = len(chunk)
            start = len(self.held)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i >= first_out
            tapped = cols is not None and first_out < len(chunk)
            if tapped and cols is not None:
                self.tap.arm(first_out, cols)
            else:
                self.tap.disarm()
            code = llama_cpp.llama_decode(self.ctx, batch)
            if code != 0:
                self.tap.disarm()
                raise EngineFailure(f"llama_decode returned {code} at position {start}")
            self.held.extend(chunk)
            if tapped:
                parts.append(self.tap.take())
            for i in range(first_out, len(chunk)):
                logits = llama_cpp.llama_get_logits_ith(self.ctx, i)
                row = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
                choices.append(int(row.argmax()))
            done += len(chunk)
        attention = np.concatenate(parts, axis=1) if parts else None
        return choices, attention

    def truncate(self, length: int) -> None:
        """Keep positions 0..length-1 of the sequence."""
        if length < len(self.held):
            llama_cpp.llama_memory_seq_rm(self.memory, 0, length, -1)
            del self.held[length:]

    def snapshot(self) -> tuple[bytes, list[int]]:
        """The sequence's keys and values and its tokens, to `restore` later."""
        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, 0))
        if written != size:
            raise EngineFailure(f"llama.cpp wrote {written} of {size} bytes of sequence state")
        return bytes(buf), list(self.held)

    def restore(self, state: tuple[bytes, list[int]]) -> None:
        """Replace the sequence with a `snapshot`; an empty sequence if that fails."""
        data, held = state
        self.truncate(0)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(llama_cpp.llama_state_seq_set_data(self.ctx, buf, len(data), 0)) == 0:
            llama_cpp.llama_memory_seq_rm(self.memory, 0, 0, -1)
            raise EngineFailure("llama.cpp could not restore a KV cache")
        self.held = list(held)

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        _close(self._context)
        _close(self._model)


def _close(resource: Any) -> None:
    # llama-cpp-python leaves close() unannotated.
    resource.close()
