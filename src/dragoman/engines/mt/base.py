"""The MT engine interface for the AlignAtt policy.

An engine drafts a continuation of the accepted target for an utterance's source
words and reports, for every drafted token, how much attention its calibrated
alignment heads put on each source word. The policy (dragoman.streaming.alignatt)
decides how much of the draft to commit; the engine never decides that.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from dragoman.engines.info import EngineInfo
from dragoman.languages import is_unsegmented

#: The cache key of the engine's own warm-up drafts (see `MTEngine.warm_up`).
WARM_UP_KEY = "warm-up"


def word_separator(lang: str) -> str:
    """What goes between two words of `lang` in running text: nothing where it is unsegmented."""
    return "" if is_unsegmented(lang) else " "


@dataclass(frozen=True)
class MTCapabilities:
    """What a backend does with a request; the directions it serves are `MTEngine.directions()`,
    read from the heads files found on disk rather than fixed at load."""

    #: PARTIAL drafts carry alignment attention over the source words (AlignAtt can cut them).
    attention: bool
    #: `context_text` and `history` reach the model (a prompt); otherwise they are ignored.
    prompt_context: bool
    #: Requests with the same `cache_key` reuse the keys and values of their common prefix.
    kv_reuse: bool
    #: PARTIAL drafts stop soon after `frontier_word` (`past_frontier_tokens`); otherwise
    #: they run to `max_new_tokens`.
    frontier_stop: bool
    #: One call may serve several requests; every backend so far drafts one per call.
    batching: bool = False
    #: Calls that may run at once (a remote backend waits on the network, not on a core).
    parallel_calls: int = 1


class DraftMode(StrEnum):
    #: A streaming draft: bounded length, attention required.
    PARTIAL = "partial"
    #: The end-of-utterance pass: translate to the end, full quality, no attention needed.
    FINAL = "final"
    #: Nothing drafted: the prompt before the source (system, `history`, instruction) goes into
    #: the KV cache of `cache_key`, in the pause after an utterance, so that the next one's first
    #: update finds it there (`sessions/mt/session.py`). An engine with no such cache answers
    #: at once with `nothing_drafted()`.
    PREFILL = "prefill"


@dataclass(frozen=True)
class MTRequest:
    source_lang: str
    target_lang: str
    #: Every source word of the open utterance in order: committed words, then tail words.
    source_words: Sequence[str]
    #: Target text already accepted for this utterance; the draft continues it verbatim.
    target_prefix: str = ""
    #: Domain hints placed in the prompt outside the source-marked region; never translated.
    context_text: str | None = None
    #: Earlier (source, target) pairs of the session, oldest first.
    history: Sequence[tuple[str, str]] = ()
    #: Force the target language: the assistant turn opens with a short label in that language
    #: ("Auf Deutsch:") before `target_prefix`; it is prompt, never part of the translation.
    #: For a redraft after a draft that copied the source (`streaming.copy_check`).
    force_target_language: bool = False
    mode: DraftMode = DraftMode.PARTIAL
    #: PARTIAL: most tokens to draft. FINAL ignores it: the engine sizes the pass
    #: (`final_token_budget`) from the source's own tokens, which only it knows.
    max_new_tokens: int = 64
    #: Cache affinity: requests with the same key may reuse the engine's KV cache.
    cache_key: str | None = None
    #: PARTIAL only: the first source word the policy will not commit against. Once a
    #: drafted token's attention peaks there or later, the engine may stop after
    #: `past_frontier_tokens` more tokens: nothing from that token on can be committed
    #: now, and a shorter draft answers sooner. None: draft `max_new_tokens`.
    frontier_word: int | None = None
    past_frontier_tokens: int = 0
    #: The source words [0, n) a committed token may attend to (the session's frontier).
    #: A remote node that runs the policy itself (`engines/mt/mt_protocol_remote.py`) is sent
    #: the words before it as committed and the rest as tail.
    accessible_words: int | None = None
    #: The session's preset and its AlignAtt knobs as MT protocol v1 `overrides`, for a node
    #: that runs the policy itself; local engines ignore them.
    preset: str | None = None
    policy: Mapping[str, object] = field(default_factory=dict)
    #: PARTIAL: called from the engine's thread after each forward pass but the last with the
    #: draft so far (`finished` false), so that what the policy commits of it can go out
    #: before the draft ends (a streaming MT job). Engines that draft in one piece ignore it.
    on_pass: Callable[[MTDraft], None] | None = field(default=None, compare=False, repr=False)
    #: PARTIAL: set from any thread once the rest of the draft is not wanted: the session has
    #: the utterance's FINAL waiting behind it, which drafts to the end at full quality anyway.
    #: The engine ends the draft after the pass under way, as at its limit, and answers what it
    #: has. Engines that draft in one piece ignore it.
    wrap_up: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)


def nothing_drafted() -> MTDraft:
    """The answer to a PREFILL request from an engine with nothing to prefill."""
    return MTDraft(token_ids=[], attention=None, finished=True)


def final_token_budget(source_words: int, source_tokens: int) -> int:
    """Most tokens a FINAL pass may add: generous, so that only a runaway is cut.

    Four per source word (at most 1024), and at least two per source token (at most
    256) for sources whose words are many tokens each (Qwen's tokenizer splits
    numbers into digits).
    """
    return max(min(1024, 32 + 4 * source_words), min(256, 2 * source_tokens + 16))


@dataclass(frozen=True)
class Decided:
    """A remote node's own commit of a PARTIAL draft: its first `tokens` tokens are committed,
    the rest is its buffer; `covered` and `reason` are its `covered_source_units` and
    `stop_reason`."""

    tokens: int
    covered: int | None
    reason: str


@dataclass(frozen=True)
class MTDraft:
    #: Token ids generated after `target_prefix` (end-of-sequence excluded).
    token_ids: list[int]
    #: Alignment-head attention of each drafted token over the source words, shape
    #: [len(token_ids), len(source_words)]; rows need not sum to one. None in FINAL mode.
    attention: npt.NDArray[np.float32] | None
    #: The model ended the translation (emitted end-of-sequence) within the draft.
    finished: bool
    #: Tokens the engine had to process for this call (prompt tokens not served by the cache + drafted tokens).
    computed_tokens: int = 0
    #: A re-translation by an engine without attention (`MTCapabilities.attention` false): the
    #: session commits a PARTIAL one by LocalAgreement with the previous draft, not by AlignAtt.
    retranslation: bool = False
    #: A node that ran the policy itself already decided the commit (MT protocol v1 to
    #: `dragoman mt-server`): the session applies it as it is, with no AlignAtt of its own.
    decided: Decided | None = None
    extra: dict[str, float] = field(default_factory=dict)


class MTEngine(abc.ABC):
    """A translation model that drafts with alignment attention. Calls are serialized by the caller."""

    name: str
    capabilities: MTCapabilities
    #: The preset the default `auto` became when this engine was chosen by measurement
    #: (`engines.mt.model_choice`); None when a preset or model was named.
    chosen_preset: str | None = None

    @abc.abstractmethod
    def directions(self) -> list[str]:
        """Directions ("en-de") with calibrated alignment heads available, sorted."""

    @abc.abstractmethod
    def draft(self, request: MTRequest) -> MTDraft:
        """Draft a continuation of `request.target_prefix`, blocking; called from a worker thread."""

    @abc.abstractmethod
    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of drafted tokens. May end in U+FFFD when the ids cut a multi-byte character."""

    def warm_up(self) -> None:
        """A streaming draft and a final pass before the first session's, so that it pays for no
        lazy set-up (kernel selection, first allocations): the server is ready only after this."""
        directions = self.directions()
        if not directions:
            return
        source, _, target = directions[0].partition("-")
        key = WARM_UP_KEY
        words = ["Good", "morning,", "everyone."]
        try:
            for mode in (DraftMode.PARTIAL, DraftMode.FINAL):
                self.draft(MTRequest(source, target, words, mode=mode, max_new_tokens=8, cache_key=key))
        finally:
            self.forget(key)

    def describe(self) -> EngineInfo:
        """Name, backend, device and compute type, for /health and the start-up log."""
        return EngineInfo(name=self.name, backend=type(self).__name__)

    def forget(self, cache_key: str) -> None:  # noqa: B027 - optional hook
        """Drop any cache held for `cache_key` (the session closed)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model."""
