"""What an MT session asks the engine for: the `MTRequest` of an utterance's draft.

A request carries the utterance's source words (committed, then the tail), the target it has
committed, the session's context and the history window of earlier pairs, the AlignAtt knobs a
remote node applies itself, and the session's cache key, so that its drafts reuse the engine's
KV cache; a partial or final draft's comes with AlignAtt's frontier over those words (which of
them a commit may attend to). The session decides when a draft is due and what it is for
(`sessions/mt/session.py`); this module only spells it out.
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.sessions.mt.events import Update, Word
from dragoman.sessions.mt.utterance import Utterance, history_window
from dragoman.sessions.mt.utterances import Utterances
from dragoman.sessions.mt.validation import SessionSetup, as_overrides
from dragoman.streaming.alignatt import Frontier, build_source_accessibility_frontier


class DraftRequests:
    """The requests of one initialised session."""

    def __init__(self, cache_key: str, setup: SessionSetup, utterances: Utterances) -> None:
        self.cache_key = cache_key
        self.setup = setup
        self.utterances = utterances
        #: The session's AlignAtt knobs as MT protocol v1 overrides (`MTRequest.policy`).
        self.policy = as_overrides(setup.params)

    def final(self, update: Update, words: Sequence[Word], utt: Utterance) -> tuple[MTRequest, Frontier]:
        """The final pass of `utt` over `words`, every one of them accessible."""
        frontier = build_source_accessibility_frontier(
            [w.end_ms for w in words], 0, clock_ms=update.clock_ms, final=True, params=self.setup.params
        )
        # The engine sizes a final pass itself.
        request = self.draft(words, (), utt, DraftMode.FINAL, 0, accessible=frontier.accessible)
        return request, frontier

    def partial(self, update: Update, words: Sequence[Word], utt: Utterance) -> tuple[MTRequest, Frontier]:
        """A streaming draft of `utt` over `words` then the update's tail, with AlignAtt's frontier."""
        params = self.setup.params
        frontier = build_source_accessibility_frontier(
            [w.end_ms for w in words],
            len(update.tail),
            clock_ms=update.clock_ms,
            final=False,
            params=params,
        )
        request = self.draft(
            words,
            update.tail,
            utt,
            DraftMode.PARTIAL,
            params.max_draft_tokens,
            frontier_word=frontier.accessible if params.stop_at_frontier else None,
            accessible=frontier.accessible,
        )
        return request, frontier

    def draft(
        self,
        words: Sequence[Word],
        tail: Sequence[str],
        utt: Utterance,
        mode: DraftMode,
        budget: int,
        *,
        frontier_word: int | None = None,
        accessible: int | None = None,
    ) -> MTRequest:
        """A draft of `utt` over `words` then `tail`, of at most `budget` tokens (PARTIAL)."""
        setup, utterances = self.setup, self.utterances
        pairs = min(
            len(utterances.history), history_window(utterances.history_total, setup.params.history_pairs)
        )
        return MTRequest(
            source_lang=setup.source_lang,
            target_lang=setup.target_lang,
            source_words=tuple([w.text for w in words] + list(tail)),
            target_prefix=utt.committed,
            context_text=setup.context_text,
            history=tuple(utterances.history[-pairs:]) if pairs else (),
            mode=mode,
            max_new_tokens=budget,
            cache_key=self.cache_key,
            force_target_language=utt.force_language,
            frontier_word=frontier_word,
            past_frontier_tokens=setup.params.past_frontier_tokens,
            accessible_words=accessible,
            preset=setup.preset,
            policy=self.policy,
        )
