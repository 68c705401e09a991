"""An MT utterance's accepted target, and what each engine draft adds to it.

The AlignAtt policy (`streaming/alignatt.py`) decides how much of a streaming draft
may be committed; this applies that decision to the utterance: the accepted
target only ever grows ("committed_text is append-only"), the draft's uncommitted
rest becomes `buffer_text`, and the draft is cached for the commit fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dragoman.engines.mt.base import MTDraft, MTRequest
from dragoman.sessions.mt.events import MTJob
from dragoman.streaming.alignatt import (
    AlignAttParams,
    CachedDraft,
    DraftText,
    PromptKey,
    attended_words,
    clean_final_text,
    select_commit,
)

Decode = Callable[[Sequence[int]], str]


@dataclass
class Utterance:
    id: int
    #: Accepted target: append-only, every translation's committed_text.
    committed: str = ""
    covered: int | None = None
    cache: CachedDraft | None = None


@dataclass(frozen=True)
class ClosedUtterance:
    id: int
    words: tuple[str, ...]
    text: str
    covered: int | None
    forced: bool


@dataclass(frozen=True)
class PartialCommit:
    """What a streaming draft makes of the utterance: its new committed text and the rest."""

    committed: str
    buffer: str
    covered: int | None
    reason: str


def commit_partial(
    job: MTJob, draft: MTDraft, utt: Utterance, params: AlignAttParams, target_lang: str, decode: Decode
) -> PartialCommit:
    """Apply the policy to a streaming draft; caches the draft on `utt` for the fast path.

    Raises ValueError (and changes nothing) for a draft whose attention does not fit it.
    """
    n_tokens, n_words = len(draft.token_ids), len(job.request.source_words)
    if draft.attention is None or draft.attention.shape != (n_tokens, n_words):
        shape = None if draft.attention is None else draft.attention.shape
        raise ValueError(f"partial draft of {n_tokens} tokens over {n_words} words has attention {shape}")
    texts = DraftText(draft.token_ids, decode)
    positions = tuple(attended_words(draft.attention))
    cut = select_commit(
        positions,
        texts,
        job.frontier,
        start=0,
        finished=draft.finished,
        target_lang=target_lang,
        params=params,
    )
    committed = extend_target(utt.committed, cut.text)
    utt.cache = CachedDraft(prompt_key(job.request), positions, texts, draft.finished, cut.end, committed)
    return PartialCommit(committed, texts.tail_text(cut.end).strip(), cut.covered, cut.reason)


def final_text(draft: MTDraft, utt: Utterance, decode: Decode) -> str:
    """The utterance's whole translation after its final pass."""
    return extend_target(utt.committed, clean_final_text(decode(draft.token_ids)))


def extend_target(accepted: str, text: str) -> str:
    """Accepted target plus newly committed text; an utterance's text starts without a space."""
    return accepted + text if accepted else text.lstrip()


def prompt_key(request: MTRequest) -> PromptKey:
    return PromptKey(
        tuple(request.source_words),
        request.context_text,
        tuple((src, tgt) for src, tgt in request.history),
        request.max_new_tokens,
    )
