"""An MT utterance's accepted target, and what each engine draft adds to it.

The AlignAtt policy (`streaming/alignatt.py`) decides how much of a streaming draft
may be committed; this applies that decision to the utterance: the accepted
target only ever grows ("committed_text is append-only"), the draft's uncommitted
rest becomes `buffer_text`, and the draft is cached for the commit fast path, which
re-cuts it on a later update with no engine call (`commit_cached`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from dragoman.engines.asr.word_agreement import split_words
from dragoman.engines.mt.base import MTDraft, MTRequest
from dragoman.engines.repetition import loop_start
from dragoman.engines.workers import CancelToken
from dragoman.sessions.mt.events import MTJob, Translation
from dragoman.streaming.alignatt import (
    AlignAttParams,
    CachedDraft,
    DraftText,
    Frontier,
    PromptKey,
    attended_words,
    clean_final_text,
    select_commit,
)
from dragoman.streaming.copy_check import copies_source, copy_decidable
from dragoman.streaming.local_agreement import agreed_words

Decode = Callable[[Sequence[int]], str]


#: The copy check runs while the utterance has committed fewer words than this: it is about
#: the first words, and later ones of a translation have names and numbers of the source.
COPY_CHECK_WORDS = 4


@dataclass
class Utterance:
    id: int
    #: Accepted target: append-only, every translation's committed_text.
    committed: str = ""
    covered: int | None = None
    cache: CachedDraft | None = None
    #: A draft copied the source: every later request of the utterance forces the target language.
    force_language: bool = False
    #: An engine without attention: the last draft's words after the accepted target, which the
    #: next draft must agree with to commit them (`streaming/local_agreement.py`).
    previous: tuple[str, ...] = ()
    #: The leading tokens of the draft in flight that its passes committed already
    #: (`commit_streamed`); its result is cut from there.
    streamed: tuple[int, ...] = ()


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

    A re-translation by an engine without attention (`MTDraft.retranslation`) is committed by
    LocalAgreement with the utterance's previous draft instead.
    Raises ValueError (and changes nothing) for a draft whose attention does not fit it.
    """
    if draft.decided is not None:
        return commit_decided(draft, utt, decode)
    if draft.retranslation:
        return commit_agreed(draft, utt, decode)
    n_tokens, n_words = len(draft.token_ids), len(job.request.source_words)
    if draft.attention is None or draft.attention.shape != (n_tokens, n_words):
        shape = None if draft.attention is None else draft.attention.shape
        raise ValueError(f"partial draft of {n_tokens} tokens over {n_words} words has attention {shape}")
    streamed, utt.streamed = utt.streamed, ()
    if tuple(draft.token_ids[: len(streamed)]) != streamed:
        # A repetition loop cut off the end of what a pass had committed: what went out
        # stands, and the next update drafts after it.
        utt.cache = None
        return PartialCommit(utt.committed, "", utt.covered, "alignatt:streamed")
    texts = DraftText(draft.token_ids, decode)
    positions = tuple(attended_words(draft.attention))
    cut = select_commit(
        positions,
        texts,
        job.frontier,
        start=len(streamed),
        finished=draft.finished,
        target_lang=target_lang,
        params=params,
    )
    committed = extend_target(utt.committed, cut.text)
    utt.cache = CachedDraft(prompt_key(job.request), positions, texts, draft.finished, cut.end, committed)
    return PartialCommit(committed, texts.tail_text(cut.end).strip(), cut.covered, cut.reason)


def commit_streamed(
    job: MTJob, draft: MTDraft, utt: Utterance, params: AlignAttParams, target_lang: str, decode: Decode
) -> PartialCommit | None:
    """What a streaming job's draft so far commits beyond what its earlier passes did, or None.

    The policy is the one the job's result gets (`commit_partial`): AlignAtt's cut, backed off
    to a unit the next token shows is whole. While the copy check still watches the
    utterance's first words (`copy_redraft`), nothing goes out before the draft has words
    enough for it to tell a copy, and nothing of a draft it calls one. Nor does a draft that
    has begun to repeat itself: the result cuts such a loop off (`engines.repetition`), and
    what went out would stand.
    """
    n_tokens, n_words = len(draft.token_ids), len(job.request.source_words)
    if draft.attention is None or draft.attention.shape != (n_tokens, n_words):
        return None
    if tuple(draft.token_ids[: len(utt.streamed)]) != utt.streamed:
        return None
    texts = DraftText(draft.token_ids, decode)
    positions = attended_words(draft.attention)
    cut = select_commit(
        positions,
        texts,
        job.frontier,
        start=len(utt.streamed),
        finished=False,
        target_lang=target_lang,
        params=params,
    )
    if cut.end <= len(utt.streamed) or loop_start(draft.token_ids, at_limit=True) is not None:
        return None
    if _watched(job.request, utt):
        text = extend_target(utt.committed, texts.tail_text(len(utt.streamed)))
        source = job.request.source_words
        if not copy_decidable(text, target_lang) or copies_source(source, text, target_lang):
            return None
    utt.streamed = tuple(draft.token_ids[: cut.end])
    committed = extend_target(utt.committed, cut.text)
    return PartialCommit(committed, texts.tail_text(cut.end).strip(), cut.covered, "alignatt:streamed")


def commit_agreed(draft: MTDraft, utt: Utterance, decode: Decode) -> PartialCommit:
    """Commit what this draft and the utterance's previous one agree on (LocalAgreement)."""
    words = split_words(decode(draft.token_ids))
    agreed = agreed_words(utt.previous, words)
    committed = extend_target(utt.committed, "".join(words[:agreed]))
    utt.previous = tuple(words[agreed:])
    utt.cache = None  # no attention to re-cut: every update drafts again
    return PartialCommit(committed, "".join(utt.previous).strip(), utt.covered, "local_agreement")


def commit_decided(draft: MTDraft, utt: Utterance, decode: Decode) -> PartialCommit:
    """Commit what a node that ran the policy itself committed (`MTDraft.decided`)."""
    decided = draft.decided
    assert decided is not None
    committed = extend_target(utt.committed, decode(draft.token_ids[: decided.tokens]))
    utt.cache = None  # the node keeps its own draft for its fast path
    buffer = decode(draft.token_ids[decided.tokens :]).strip()
    return PartialCommit(committed, buffer, decided.covered, decided.reason)


def commit_cached(
    request: MTRequest, frontier: Frontier, utt: Utterance, params: AlignAttParams, target_lang: str
) -> PartialCommit | None:
    """The commit fast path: the utterance's cached draft re-cut at `frontier`, with no engine
    call (it advances the cache); None where a new draft of `request` is due instead."""
    cache = utt.cache
    if not params.commit_fast_path or not cache or not cache.serves(prompt_key(request), utt.committed):
        return None
    cut = cache.recut(frontier, target_lang, params)
    if cut.end == cache.consumed and cut.reason == "alignatt:max_tokens":
        # The draft ran out before the frontier (a draft ended early, or a short
        # one): a re-cut releases nothing that a new draft would not.
        return None
    committed = extend_target(utt.committed, cut.text)
    utt.cache = cache.advanced(cut, committed)
    buffer = cache.texts.tail_text(cut.end).strip()
    return PartialCommit(committed, buffer, cut.covered, "alignatt:commit_fast_path")


def copy_redraft(
    job: MTJob, draft: MTDraft, utt: Utterance, target_lang: str, decode: Decode
) -> MTJob | None:
    """The job again with the target language forced, when its draft copies the source.

    Checked on what the draft makes of the utterance (its accepted target plus the whole
    draft, so that English is caught before any of it is committed), once per utterance:
    a forced request is never checked again. None: the draft is used as it is.
    """
    request = job.request
    if draft.decided is not None:
        return None  # the node that decided it ran the check itself
    if not _watched(request, utt):
        return None
    text = extend_target(utt.committed, clean_final_text(decode(draft.token_ids)))
    if not copies_source(request.source_words, text, target_lang):
        return None
    utt.force_language = True
    forced = replace(request, force_target_language=True, target_prefix=utt.committed)
    return replace(job, request=forced, cancel=CancelToken())


def _watched(request: MTRequest, utt: Utterance) -> bool:
    """Whether the copy check still looks at what a draft of `request` commits."""
    return not request.force_target_language and len(utt.committed.split()) < COPY_CHECK_WORDS


def final_text(draft: MTDraft, utt: Utterance, decode: Decode) -> str:
    """The utterance's whole translation after its final pass."""
    return extend_target(utt.committed, clean_final_text(decode(draft.token_ids)))


def extend_target(accepted: str, text: str) -> str:
    """Accepted target plus newly committed text; an utterance's text starts without a space."""
    return accepted + text if accepted else text.lstrip()


def advance(
    utt: Utterance,
    seq: int,
    committed: str,
    buffer: str,
    covered: int | None,
    reason: str,
    *,
    final: bool = False,
    forced: bool = False,
) -> Translation:
    """Move `utt`'s accepted target on to `committed` (and its coverage): the translation saying so."""
    # Append-only (MT protocol v1): previous + committed_delta == committed_text, byte for byte.
    if not committed.startswith(utt.committed):
        raise AssertionError("committed_text must extend the accepted target")
    delta = committed[len(utt.committed) :]
    utt.committed = committed
    if covered is not None:
        utt.covered = covered if final or utt.covered is None else max(utt.covered, covered)
    return Translation(seq, utt.id, final, committed, delta, buffer, utt.covered, reason, forced)


def history_window(total: int, pairs: int) -> int:
    """How many of the latest history pairs the prompt holds, `total` utterances into the session.

    Not always the last `pairs`: a window that slides by one pair per utterance changes the
    prompt right after the system prompt, so the first update of every utterance recomputes
    the whole history (about 60 tokens a pair; 3-4 s of prefill for two pairs of the 1.5B on
    one thread). The window grows instead, one pair per utterance, from `pairs` to `2 * pairs`,
    then falls back to `pairs`. While it grows, the previous utterance's prompt and final
    translation are a prefix of the new prompt token for token (the history turns are
    rendered as the current turn is), so the engine's KV cache serves all of it; the history
    is recomputed once every `pairs + 1` utterances.
    """
    if pairs <= 0:
        return 0
    if total <= 2 * pairs:
        return total
    return pairs + (total - 2 * pairs - 1) % (pairs + 1)


def prompt_key(request: MTRequest) -> PromptKey:
    return PromptKey(
        tuple(request.source_words),
        request.context_text,
        tuple((src, tgt) for src, tgt in request.history),
        request.max_new_tokens,
        request.force_target_language,
    )
