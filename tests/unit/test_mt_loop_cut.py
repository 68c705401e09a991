"""The MT draft ends a repetition loop instead of running to its token limit (no model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from dragoman.engines.mt.draft_loop import cut_loop
from dragoman.engines.mt.llama_context import TappedContext
from dragoman.engines.mt.llama_draft import SequenceCache, draft
from dragoman.engines.mt.qwen_prompt import Prompt
from tests.unit.test_mt_insert_plan import HEAD, TAIL, HeldTokens

EOS = 0


class _Tap:
    def set_heads(self, heads: Sequence[tuple[int, int]]) -> None:
        pass


class ScriptedModel(HeldTokens):
    """Greedy choices from a script: after the prompt, the script's tokens in order."""

    def __init__(self, prompt_length: int, script: Sequence[int]) -> None:
        super().__init__()
        self.prompt_length = prompt_length
        self.script = list(script)
        self.tap = _Tap()

    def is_eog(self, token: int) -> bool:
        return token == EOS

    def eval(self, tokens: Sequence[int], out_from: int, cols: slice | None) -> tuple[list[int], None]:
        self.held.extend(tokens)
        choices = []
        for end in range(len(self.held) - len(tokens) + out_from + 1, len(self.held) + 1):
            generated = end - self.prompt_length
            choices.append(self.script[generated] if generated < len(self.script) else EOS)
        return choices, None


def run(target_prefix: list[int], script: list[int], limit: int = 200) -> tuple[list[int], float]:
    source = [1, 2, 3]
    ids = HEAD + source + TAIL + target_prefix
    prompt = Prompt(
        ids,
        [(len(HEAD) + i, len(HEAD) + i + 1) for i in range(3)],
        len(HEAD),
        len(HEAD) + 3,
        len(ids) - len(target_prefix),
    )
    model = ScriptedModel(len(ids), script)
    ctx = cast(TappedContext, cast(Any, model))
    result = draft(ctx, SequenceCache(ctx), "utt", prompt, None, limit, speculate=False)
    return result.token_ids, result.extra["loop_cuts"]


def test_a_loop_keeps_one_copy_and_stops() -> None:
    tokens, cuts = run([50], [60] + [61, 62] * 100)
    assert tokens == [60, 61, 62] and cuts == 1


def test_a_loop_whose_first_copy_was_streamed_adds_nothing() -> None:
    # "Die Konzepte der" streamed, then the final pass says " Konzepte der" over and over.
    tokens, cuts = run([50, 51, 52], [51, 52] * 100)
    assert tokens == [] and cuts == 1


def test_a_translation_that_ends_is_left_alone() -> None:
    tokens, cuts = run([50], [60, 61, 62, 60, 61, 63, 64])
    assert tokens == [60, 61, 62, 60, 61, 63, 64] and cuts == 0


def test_a_short_repetition_is_not_a_loop() -> None:
    # "no, no" twice is speech; the loop needs three copies and six tokens.
    tokens, cuts = run([], [70, 71, 70, 71, 72])
    assert tokens == [70, 71, 70, 71, 72] and cuts == 0


def test_cut_loop_cuts_attention_rows_with_their_tokens() -> None:
    tokens = [60, 61, 62, 61, 62, 61, 62, 61, 62]
    rows = [f"row{i}" for i in range(len(tokens))]
    assert cut_loop([50], tokens, rows)
    assert tokens == [60, 61, 62] and rows == ["row0", "row1", "row2"]
    assert not cut_loop([50], tokens, rows)
