"""A GGUF model in llama.cpp with one sequence, greedy choices per row and attention taps.

Through llama-cpp-python's low-level API (`engines.llama_native`): the high-level
`Llama` keeps logits of one row and knows no eval callback. Flash attention is off, since with it the
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.engines.llama_models import ModelContext
from dragoman.engines.llama_native import ContextSpec, NativeModel
from dragoman.engines.llama_threads import IdleThreads
from dragoman.engines.mt.llama_cells import CellMap
from dragoman.engines.mt.llama_tap import AttentionTap
from dragoman.engines.mt.target_script import LowercaseWords
from dragoman.errors import EngineFailure, ModelUnavailable


class GGUFTokenizer:
    """The two calls `PromptBuilder` makes of a transformers tokenizer, on llama.cpp's vocabulary."""

    def __init__(self, model: NativeModel, chat_template: str) -> None:
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
        return {"input_ids": self._model.tokenize(text, add_bos=add_special_tokens)}

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

    def __init__(
        self, path: Path, *, context_tokens: int, threads: int, idle_threads: int = 0, batch: int = 512
    ) -> None:
        """`idle_threads`: the threads of a decode while no other engine call of the process
        computes (`engines.llama_threads`); at most `threads`: always `threads`."""
        self.tap = AttentionTap()
        spec = ContextSpec(
            context_tokens=context_tokens,
            threads=threads,
            # n_batch = n_ubatch: one llama_decode is one ubatch, which the tap relies on.
            batch=batch,
            # One unified KV stream for the sequence and `insert`'s helper: copying between
            # them is then a change of cell metadata, not of data.
            sequences=2,
            unified_kv=True,
            flash_attention=False,
        )
        #: On the model any other engine on the same GGUF shares (`engines.llama_models`).
        self._loaded = ModelContext(path, spec, self.tap.node_filter)
        self.backend = self._loaded.backend
        self._model, self._context = self._loaded.model, self._loaded.context
        self.n_ctx = self._context.n_ctx
        self.batch_size = self._context.batch_size
        self.threads = threads
        #: `threads`, or `idle_threads` while no other engine call computes.
        self.idle = IdleThreads(self._context.set_threads, threads, idle_threads)
        self.n_vocab = self._model.n_vocab
        self.n_layer = self._model.n_layer
        self.n_head = self._model.n_head
        self.metadata: dict[str, str] = dict(self._model.metadata)
        template = self.metadata.get("tokenizer.chat_template")
        if not template:
            self._loaded.close()
            raise ModelUnavailable(f"{path.name} has no chat template")
        self.tokenizer = GGUFTokenizer(self._model, template)
        #: Tokens the sequence holds, position by position, and the cell of each.
        self.held: list[int] = []
        self.cells = CellMap(self.n_ctx)
        #: The first position computed without some source tokens inserted before it since,
        #: and how many those are (None and 0: every cell is exact).
        self.stale_from: int | None = None
        self.stale_tokens = 0
        #: Tokens no greedy choice may be (`engines.mt.target_script`); None: any.
        self.excluded: npt.NDArray[np.bool_] | None = None
        #: A position and the tokens the choice after it may not be either: the translation's
        #: first token, which opens no quote the source lacks (`target_script.opening_quotes`).
        self.excluded_after: tuple[int, npt.NDArray[np.bool_]] | None = None
        #: Tokens no choice may be after a given token: a lowercase Latin word in Chinese
        #: (`target_script.LowercaseWords`); None: no such rule.
        self.lowercase_words: LowercaseWords | None = None

    # -- vocabulary ---------------------------------------------------------------------

    def piece(self, token: int) -> bytes:
        """The token's bytes; control tokens (<|im_end|>) are empty."""
        return self._model.piece(token)

    def is_eog(self, token: int) -> bool:
        return self._model.is_eog(token)

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
                row = self._context.logits(i)
                choice = int(row.argmax())
                masks = self._excluded_at(start + i, chunk[i])
                if any(mask[choice] for mask in masks):
                    # Rare: only then is the vocabulary masked (a copy of its logits).
                    choice = int(np.where(np.logical_or.reduce(masks), -np.inf, row).argmax())
                choices.append(choice)
            done += len(chunk)
        attention = np.concatenate(parts, axis=1) if parts else None
        return choices, attention

    def _excluded_at(self, position: int, token: int) -> list[npt.NDArray[np.bool_]]:
        """The masks of the tokens the choice after `token`, held at `position`, may not be."""
        masks = [] if self.excluded is None else [self.excluded]
        if self.excluded_after is not None and self.excluded_after[0] == position:
            masks.append(self.excluded_after[1])
        if self.lowercase_words is not None:
            masks.append(self.lowercase_words.after(token))
        return masks

    def insert(self, tokens: Sequence[int], at: int) -> None:
        """Put `tokens` at positions `at`.. and move what the sequence held there up after them.

        The new tokens see what comes before them, exactly as in a full pass. The moved
        cells keep the keys and values computed without them (re-rotated to their new
        positions by llama.cpp's K-shift): `stale_tokens` counts such tokens.
        """
        n, length = len(tokens), len(self.held)
        if not 0 < at <= length or not 0 < n <= self.batch_size or length + n > self.n_ctx:
            raise EngineFailure(f"cannot insert {n} tokens at position {at} of {length}")
        kv = self._context
        kv.shift(_SEQ, at, -1, n)
        # The helper sequence sees positions 0..at-1 and, decoded into it, the new tokens:
        # llama.cpp requires every decode to continue its sequence's last position.
        kv.copy(_SEQ, _INSERT_SEQ, 0, at)
        checked = self.tap.wanted
        try:
            if checked:
                self.tap.arm(n - 1, np.zeros(0, np.intp))  # for the last row's reach only
            self.cells.insert(at, n)
            self._decode(tokens, at, _INSERT_SEQ, n)
            if checked:
                self.tap.take()
                self.cells.check_reach(self.tap.reach, at + n - 1)
            kv.copy(_INSERT_SEQ, _SEQ, at, at + n)
        finally:
            self.tap.disarm()
            kv.remove(_INSERT_SEQ, -1, -1)
        self.held[at:at] = list(tokens)
        self.stale_from = at + n if self.stale_from is None else self.stale_from + n
        self.stale_tokens += n

    def _decode(self, chunk: Sequence[int], start: int, seq: int, first_out: int) -> None:
        """One `llama_decode` of `chunk` at positions `start`.. of `seq`, logits from `first_out`."""
        self.idle.before_decode()
        try:
            self._context.decode(chunk, start, seq, first_out)
        except EngineFailure:
            self.tap.disarm()
            raise

    def truncate(self, length: int) -> None:
        """Keep positions 0..length-1 of the sequence."""
        if length == 0:
            # All of it, and llama.cpp's cell search back to cell 0, as the map's.
            self._context.clear()
            self.cells = CellMap(self.n_ctx)
            self.held.clear()
        elif length < len(self.held):
            self._context.remove(_SEQ, length)
            self.cells.remove_from(length)
            del self.held[length:]
        if self.stale_from is not None and length <= self.stale_from:
            self.stale_from, self.stale_tokens = None, 0

    def snapshot(self) -> SavedSequence:
        """The sequence's keys and values and its tokens, to `restore` later."""
        data = bytes(self._context.save(_SEQ))
        cells = [int(c) for c in self.cells.cells(slice(None))]
        return SavedSequence(data, list(self.held), cells, self.stale_from, self.stale_tokens)

    def restore(self, state: SavedSequence) -> None:
        """Replace the sequence with a `snapshot`; an empty sequence if that fails."""
        self.truncate(0)
        if not self._context.load(_SEQ, state.data):
            self.truncate(0)
            raise EngineFailure("llama.cpp could not restore a KV cache")
        self.cells.restore(state.cells)
        self.held = list(state.held)
        self.stale_from, self.stale_tokens = state.stale_from, state.stale_tokens

    def close(self) -> None:
        self._loaded.close()
