"""A GGUF model in llama.cpp with one sequence, greedy choices per row and attention taps.

Through llama-cpp-python's low-level API: the high-level `Llama` keeps logits of
one row and knows no eval callback. Flash attention is off, since with it the
softmaxed scores never exist as a tensor (`engines.mt.llama_tap`).

Source words can be inserted before the kept assistant header and target prefix
(`insert`) instead of recomputing those: the context then follows which KV-cache
cell holds which position (`engines.mt.llama_cells`), and how many source tokens the
moved cells never saw (`stale_tokens`).

The vocabulary of the GGUF is also the prompt tokenizer (`GGUFTokenizer`), with the
chat template stored in the file: the prompts are token for token those of the
torch engine, whose tokenizer transformers builds from the same file.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals

from dragoman.engines import llama_models
from dragoman.engines.llama_backend import load_backend
from dragoman.engines.mt.llama_cells import CellMap
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


#: The sequence drafts live in, and the helper sequence through which `insert` decodes
#: words that go before positions the sequence already holds (llama.cpp only appends).
_SEQ, _INSERT_SEQ = 0, 1


@dataclass(frozen=True)
class SavedSequence:
    """A sequence's keys and values (llama.cpp's bytes) and what the context knows of them."""

    data: bytes
    held: list[int]
    cells: list[int]
    stale_from: int | None
    stale_tokens: int


class TappedContext:
    """One llama.cpp context of `context_tokens`, sequence 0 only, with an `AttentionTap`."""

    def __init__(self, path: Path, *, context_tokens: int, threads: int, batch: int = 512) -> None:
        self.backend = load_backend()
        #: Shared with any other engine on the same GGUF (`engines.llama_models`).
        self._model = llama_models.acquire(path)
        self.tap = AttentionTap()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context_tokens
        # n_batch = n_ubatch: one llama_decode is one ubatch, which the tap relies on.
        params.n_batch = params.n_ubatch = min(batch, context_tokens)
        # One unified KV stream for the sequence and `insert`'s helper: copying between
        # them is then a change of cell metadata, not of data.
        params.n_seq_max = 2
        params.kv_unified = True
        params.n_threads = params.n_threads_batch = threads
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.cb_eval = self.tap.callback
        params.cb_eval_user_data = None
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
        self.n_vocab = int(self._model.n_vocab())
        self.n_layer = int(llama_cpp.llama_model_n_layer(self._model.model))
        self.n_head = int(llama_cpp.llama_model_n_head(self._model.model))
        self.metadata: dict[str, str] = dict(self._model.metadata())
        self._batch = llama_cpp.llama_batch_init(self.batch_size, 0, 1)
        template = self.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailable(f"{path.name} has no chat template")
        self.tokenizer = GGUFTokenizer(self._model, template)
        #: Tokens the sequence holds, position by position, and the cell of each.
        self.held: list[int] = []
        self.cells = CellMap(self.n_ctx)
        #: The first position computed without some source tokens inserted before it since,
        #: and how many those are (None and 0: every cell is exact).
        self.stale_from: int | None = None
        self.stale_tokens = 0

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

        With `cols` (a span of positions), also the tapped heads' attention of those rows
        over the tokens at `cols`, [heads, rows, cols].
        """
        if len(self.held) + len(tokens) > self.n_ctx:
            raise EngineFailure(f"the prompt and draft exceed the context of {self.n_ctx} tokens")
        choices: list[int] = []
        parts = []
        done = 0
        while done < len(tokens):
            chunk = tokens[done : done + self.batch_size]
            first_out = max(0, out_from - done)
            start = len(self.held)
            tapped = cols is not None and first_out < len(chunk)
            self.cells.append(len(chunk))  # where llama.cpp will put them, which the tap reads
            if tapped and cols is not None:
                self.tap.arm(first_out, self.cells.cells(cols))
            else:
                self.tap.disarm()
            self._decode(chunk, start, _SEQ, first_out)
            self.held.extend(chunk)
            if tapped:
                parts.append(self.tap.take())
                self.cells.check_reach(self.tap.reach, len(self.held) - 1)
            for i in range(first_out, len(chunk)):
                logits = llama_cpp.llama_get_logits_ith(self.ctx, i)
                row = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
                choices.append(int(row.argmax()))
            done += len(chunk)
        attention = np.concatenate(parts, axis=1) if parts else None
        return choices, attention

    def insert(self, tokens: Sequence[int], at: int) -> None:
        """Put `tokens` at positions `at`.. and move what the sequence held there up after them.

        The new tokens see what comes before them, exactly as in a full pass. The moved
        cells keep the keys and values computed without them (re-rotated to their new
        positions by llama.cpp's K-shift): `stale_tokens` counts such tokens.
        """
        n, length = len(tokens), len(self.held)
        if not 0 < at <= length or not 0 < n <= self.batch_size or length + n > self.n_ctx:
            raise EngineFailure(f"cannot insert {n} tokens at position {at} of {length}")
        mem = self.memory
        llama_cpp.llama_memory_seq_add(mem, _SEQ, at, -1, n)
        # The helper sequence sees positions 0..at-1 and, decoded into it, the new tokens:
        # llama.cpp requires every decode to continue its sequence's last position.
        llama_cpp.llama_memory_seq_cp(mem, _SEQ, _INSERT_SEQ, 0, at)
        checked = self.tap.wanted
        try:
            if checked:
                self.tap.arm(n - 1, np.zeros(0, np.intp))  # for the last row's reach only
            self.cells.insert(at, n)
            self._decode(tokens, at, _INSERT_SEQ, n)
            if checked:
                self.tap.take()
                self.cells.check_reach(self.tap.reach, at + n - 1)
            llama_cpp.llama_memory_seq_cp(mem, _INSERT_SEQ, _SEQ, at, at + n)
        finally:
            self.tap.disarm()
            llama_cpp.llama_memory_seq_rm(mem, _INSERT_SEQ, -1, -1)
        self.held[at:at] = list(tokens)
        self.stale_from = at + n if self.stale_from is None else self.stale_from + n
        self.stale_tokens += n

    def _decode(self, chunk: Sequence[int], start: int, seq: int, first_out: int) -> None:
        """One `llama_decode` of `chunk` at positions `start`.. of `seq`, logits from `first_out`."""
        batch = self._batch
        batch.n_tokens = len(chunk)
        for i, token in enumerate(chunk):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = i >= first_out
        code = llama_cpp.llama_decode(self.ctx, batch)
        if code != 0:
            self.tap.disarm()
            raise EngineFailure(f"llama_decode returned {code} at position {start}")

    def truncate(self, length: int) -> None:
        """Keep positions 0..length-1 of the sequence."""
        if length == 0:
            # All of it, and llama.cpp's cell search back to cell 0, as the map's.
            llama_cpp.llama_memory_clear(self.memory, False)
            self.cells = CellMap(self.n_ctx)
            self.held.clear()
        elif length < len(self.held):
            llama_cpp.llama_memory_seq_rm(self.memory, _SEQ, length, -1)
            self.cells.remove_from(length)
            del self.held[length:]
        if self.stale_from is not None and length <= self.stale_from:
            self.stale_from, self.stale_tokens = None, 0

    def snapshot(self) -> SavedSequence:
        """The sequence's keys and values and its tokens, to `restore` later."""
        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, _SEQ))
        buf = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, _SEQ))
        if written != size:
            raise EngineFailure(f"llama.cpp wrote {written} of {size} bytes of sequence state")
        cells = [int(c) for c in self.cells.cells(slice(None))]
        return SavedSequence(bytes(buf), list(self.held), cells, self.stale_from, self.stale_tokens)

    def restore(self, state: SavedSequence) -> None:
        """Replace the sequence with a `snapshot`; an empty sequence if that fails."""
        self.truncate(0)
        buf = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
        if int(llama_cpp.llama_state_seq_set_data(self.ctx, buf, len(state.data), _SEQ)) == 0:
            self.truncate(0)
            raise EngineFailure("llama.cpp could not restore a KV cache")
        self.cells.restore(state.cells)
        self.held = list(state.held)
        self.stale_from, self.stale_tokens = state.stale_from, state.stale_tokens

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
