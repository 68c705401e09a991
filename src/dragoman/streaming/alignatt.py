"""The AlignAtt commit policy over an MT draft, without a model.

An engine drafts a continuation of the accepted target and reports, per drafted
token, its alignment-head attention over the source words. AlignAtt commits the
draft's tokens in order while each one attends (argmax) to a source word that is
*accessible*, and stops at the first that does not: a token that looks at words
the ASR may still revise (the tail) or at the last `frontier_margin` positions was
produced from too little source.

Accessibility (the reference policy's `build_source_accessibility_frontier`): committed words
are accessible, tail words are not; "the prompt text itself does not encode
accessibility", so when the ASR commits words that were already in the prompt as
tail, the draft is still exactly what the model would produce, and re-cutting it
against the new frontier releases held tokens without an engine call (the commit
fast path, `CachedDraft`).

Commits end on *target unit* boundaries: whole words for languages written with
spaces, jieba's words for Chinese, characters for ja/th. A cut is never placed
inside a multi-byte character (its decode ends in U+FFFD). Chinese once committed
up to any character and held the last one back, since the character before the cut
is often the first of a word the next tokens decide ("美" of 美国 or 美元); cutting
where jieba's segmentation of the whole draft ends a word keeps such words whole
and commits the rest at once (en→zh FLORES on an Intel Xeon: computation-aware LAAL
2641 -> 2299 ms, BLEU 31.4 -> 29.7 against 32.4 offline, docs/mt.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from dragoman.languages import UNSEGMENTED_LANGS, is_unsegmented, primary_subtag
from dragoman.streaming.agreement import agrees_with_next
from dragoman.streaming.clauses import chinese_tokens

_REPLACEMENT = "\ufffd"


@dataclass(frozen=True)
class AlignAttParams:
    """Policy knobs; a preset is one of these, client overrides replace fields."""

    #: f: tokens attending to the last f source positions are held (not when final).
    frontier_margin: int = 1
    #: Committed words ending less than this many ms before the stream clock count as tail.
    inaccessible_ms: float = 0.0
    #: Units held back after the AlignAtt cut (more stability, more lag).
    hold_back_target_units: int = 0
    #: More units held when the target is written without spaces (zh, ja, ...). Where a
    #: unit is one character (ja, th, ...), the last one before the cut is often the first
    #: of a word the tail decides; Chinese units are jieba's words, which need no hold.
    unsegmented_hold_back: int = 0
    #: A commit adding fewer units than this waits for the next update.
    min_emit_target_units: int = 0
    #: A partial commit never ends on an article (`streaming.agreement`): its form is
    #: bound to the noun after it, which the source may not have given yet.
    hold_articles: bool = True
    #: Tokens drafted per streaming engine call.
    max_draft_tokens: int = 24
    #: Re-cut the cached draft when only accessibility changed.
    commit_fast_path: bool = True
    #: End a streaming draft soon after its first token that attends past the frontier:
    #: nothing from there on can be committed yet, so a shorter draft answers sooner.
    #: The cost is a shorter buffer_text and less draft for the fast path to release.
    stop_at_frontier: bool = False
    #: Tokens still drafted after that token (speculation for the next update).
    past_frontier_tokens: int = 0
    #: (source, target) pairs of earlier utterances put in the prompt.
    history_pairs: int = 2


@dataclass(frozen=True)
class Frontier:
    """Source positions [0, accessible) may be attended to by committed tokens."""

    n_source: int
    accessible: int


def build_source_accessibility_frontier(
    committed_end_ms: Sequence[float | None],
    n_tail: int,
    *,
    clock_ms: float,
    final: bool,
    params: AlignAttParams,
) -> Frontier:
    """The frontier over committed words followed by `n_tail` tail words.

    Committed words are accessible, tail words are not. A committed word that ended
    less than `inaccessible_ms` before the clock is treated as tail, and so is every
    word after it (the frontier is a prefix). A word without timestamps is committed,
    so it stays accessible. The last `frontier_margin` source positions are held
    unless the utterance is final: then everything is accessible.
    """
    n_committed = len(committed_end_ms)
    n_source = n_committed + n_tail
    if final:
        return Frontier(n_source, n_source)
    accessible = n_committed
    if params.inaccessible_ms > 0:
        limit = clock_ms - params.inaccessible_ms
        for index, end in enumerate(committed_end_ms):
            if end is not None and end > limit:
                accessible = index
                break
    accessible = max(0, min(accessible, n_source - params.frontier_margin))
    return Frontier(n_source, accessible)


class DraftText:
    """Decoded text of every token prefix of a draft, computed once per draft.

    `text(a, b)` is what tokens [a, b) append to the text of tokens [0, a), taken as
    the difference of prefix decodes so that leading spaces survive. Holding the
    texts also means a fast-path re-cut needs no tokenizer call.
    """

    def __init__(self, token_ids: Sequence[int], decode: Callable[[Sequence[int]], str]) -> None:
        ids = list(token_ids)
        self.prefixes = [decode(ids[:k]) if k else "" for k in range(len(ids) + 1)]

    def __len__(self) -> int:
        return len(self.prefixes) - 1

    def clean(self, k: int) -> bool:
        """Whether a cut after k tokens ends on a whole character."""
        return not self.prefixes[k].endswith(_REPLACEMENT)

    def text(self, start: int, end: int) -> str | None:
        """Text of tokens [start, end), or None when the prefixes do not line up."""
        head, whole = self.prefixes[start], self.prefixes[end]
        if not whole.startswith(head):
            return None
        return whole[len(head) :]

    def tail_text(self, start: int) -> str:
        """Display text of tokens [start, n), with any broken character dropped."""
        text = self.text(start, len(self)) or ""
        return text.replace(_REPLACEMENT, "")


@dataclass(frozen=True)
class CommitCut:
    #: Tokens committed, counted from the draft's start (>= the `start` passed in).
    end: int
    #: Text the committed tokens append to the accepted target.
    text: str
    #: 1 + the highest source word the committed tokens attend to; None when none were committed.
    covered: int | None
    #: Why drafting or committing stopped: "alignatt:attention_frontier", "alignatt:eos",
    #: or "alignatt:max_tokens".
    reason: str


def attended_words(attention: npt.NDArray[np.float32]) -> list[int]:
    """Argmax source word of each token; -1 for a row with no usable attention."""
    matrix = np.nan_to_num(np.asarray(attention, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    if matrix.ndim != 2:
        raise ValueError(f"attention must be 2-D, got shape {matrix.shape}")
    if matrix.shape[1] == 0:
        return [-1] * matrix.shape[0]
    best = matrix.argmax(axis=1)
    return [int(b) if row[b] > 0 else -1 for b, row in zip(best, matrix, strict=True)]


def unit_boundaries(texts: DraftText, start: int, finished: bool, target_lang: str) -> list[int]:
    """Cut points in (start, n] that end a target unit, ascending.

    A cut ends a unit when it is on a whole character and either the next token opens
    a new word (its text starts with whitespace), a Chinese word of the draft ends
    there, the target is otherwise unsegmented, or it is the end of a finished draft.
    As a spaced word, a Chinese draft's last word may still grow: it ends a unit only
    when the draft is finished.
    """
    lang = primary_subtag(target_lang)
    unsegmented = lang in UNSEGMENTED_LANGS
    n = len(texts)
    word_ends = _chinese_word_ends(texts) if lang == "zh" else None
    cuts: list[int] = []
    for k in range(start + 1, n + 1):
        if not texts.clean(k) or texts.text(start, k) is None:
            continue
        if k == n:
            if finished or (unsegmented and word_ends is None):
                cuts.append(k)
            continue
        if word_ends is not None:
            if len(texts.prefixes[k]) in word_ends:
                cuts.append(k)
            continue
        following = texts.text(k, k + 1)
        if unsegmented or (following is not None and following[:1].isspace()):
            cuts.append(k)
    return cuts


def _chinese_word_ends(texts: DraftText) -> frozenset[int]:
    """Where jieba's words end in the whole draft's text (character offsets). A broken
    character can only end the text (`DraftText.clean` rules out a cut there)."""
    return frozenset(end for _, end in chinese_tokens(texts.prefixes[-1]))


def prepare_units(target_lang: str) -> None:
    """Load what cutting `target_lang` into units takes (jieba's dictionary for Chinese,
    about 0.5 s), so that no session's first commit waits for it."""
    if primary_subtag(target_lang) == "zh":
        chinese_tokens("中文")


def select_commit(
    positions: Sequence[int],
    texts: DraftText,
    frontier: Frontier,
    *,
    start: int,
    finished: bool,
    target_lang: str,
    params: AlignAttParams,
) -> CommitCut:
    """How much of the draft after token `start` to commit.

    `positions` is `attended_words(attention)` for the whole draft. Committing stops
    at the first token attending to an inaccessible word (or to none), backs off to
    the last unit boundary, then holds back `hold_back_target_units` more units (plus
    `unsegmented_hold_back` characters for a target without spaces), and any articles
    the commit would end on (`hold_articles`). The unit that ends a finished draft is
    never committed: drafts are streaming ones.
    """
    n = len(texts)
    if len(positions) != n:
        raise ValueError(f"{len(positions)} attention rows for {n} drafted tokens")
    stop = next(
        (i for i in range(start, n) if not 0 <= positions[i] < frontier.accessible),
        n,
    )
    if stop < n:
        reason = "alignatt:attention_frontier"
    elif finished:
        reason = "alignatt:eos"
    else:
        reason = "alignatt:max_tokens"
    cuts = [k for k in unit_boundaries(texts, start, finished, target_lang) if k <= stop]
    if finished:
        # The model closed the translation over a source that is still open (more words
        # may come until the final): its last unit, typically the sentence's closing
        # punctuation, is held for the final pass. Committed, it would end the sentence
        # early and the final would have nothing left to add.
        cuts = [k for k in cuts if k < n]
    hold = params.hold_back_target_units
    if is_unsegmented(target_lang):
        hold += params.unsegmented_hold_back
    if hold > 0:
        cuts = cuts[: max(0, len(cuts) - hold)]
    if params.hold_articles:
        while cuts and agrees_with_next(
            texts.text(cuts[-2] if len(cuts) > 1 else start, cuts[-1]) or "", target_lang
        ):
            cuts.pop()
    if not cuts or len(cuts) < params.min_emit_target_units:
        return CommitCut(start, "", None, reason)
    end = cuts[-1]
    text = texts.text(start, end)
    assert text is not None  # unit_boundaries only keeps cuts whose text lines up
    return CommitCut(end, text, 1 + max(positions[start:end]), reason)


@dataclass(frozen=True)
class PromptKey:
    """Everything in the engine prompt apart from the accepted target prefix."""

    source_words: tuple[str, ...]
    context_text: str | None
    history: tuple[tuple[str, str], ...]
    max_new_tokens: int
    force_target_language: bool = False


@dataclass(frozen=True)
class CachedDraft:
    """The last streaming draft of an utterance, with how far it has been committed.

    `accepted` is the utterance's accepted target once `consumed` tokens were
    committed; the draft stays valid for re-cutting while the prompt key and the
    accepted target are unchanged (then tokens [consumed, n) are exactly what a new
    engine call would draft, since the prompt is the same).
    """

    key: PromptKey
    positions: tuple[int, ...]
    texts: DraftText
    finished: bool
    consumed: int
    accepted: str

    def serves(self, key: PromptKey, accepted: str) -> bool:
        """Whether a re-cut can answer a request with this prompt, avoiding an engine call.

        A draft used up without an end-of-sequence has nothing left to release.
        """
        exhausted = self.consumed >= len(self.texts) and not self.finished
        return not exhausted and self.key == key and self.accepted == accepted

    def recut(self, frontier: Frontier, target_lang: str, params: AlignAttParams) -> CommitCut:
        return select_commit(
            self.positions,
            self.texts,
            frontier,
            start=self.consumed,
            finished=self.finished,
            target_lang=target_lang,
            params=params,
        )

    def advanced(self, cut: CommitCut, accepted: str) -> CachedDraft:
        return replace(self, consumed=cut.end, accepted=accepted)


def clean_final_text(text: str) -> str:
    """A FINAL draft's text without a trailing broken character or whitespace."""
    return text.rstrip(_REPLACEMENT).rstrip()
