"""An MT session's utterances one after another: which is open, which id comes next, and
what the closed ones leave behind (the history, the last closed one).

Utterances: `is_final` closes the open utterance with a FINAL engine pass that
continues the streamed partial, and the next update must carry utterance_id + 1.
Past `max_utterance_words` committed words a partial update is translated as final
with `forced_final`; the client then bumps its utterance_id as for its own
finalization. Its updates for the old id that were already on the way are answered
with the forced final again. WhisperLiveKit's client may still put the old words
in front of its next utterance (a punctuation commit that raced the rollover); on
the utterance after a forced final, a leading run equal to the forced words is
dropped. An id one past the expected one closes the open utterance without a final
pass (the client abandoned it). Anything else is bad_protocol.

What a draft commits to one utterance is decided in `sessions/mt/utterance.py`; the
session (`sessions/mt/session.py`) sends what `route` answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.engines.mt.base import word_separator
from dragoman.sessions.mt.events import Error, ErrorCode, Translation, Update, Word
from dragoman.sessions.mt.utterance import ClosedUtterance, Utterance
from dragoman.sessions.mt.validation import MAX_HISTORY_PAIRS
from dragoman.streaming.copy_check import copies_source


class Utterances:
    def __init__(self) -> None:
        #: The open utterance, if any.
        self.open: Utterance | None = None
        #: The id the next utterance must carry once the open one closed.
        self.next_id: int | None = None
        #: The utterance of the last final dropped at the bound: the one after it may follow.
        self.dropped_final: int | None = None
        self.last_closed: ClosedUtterance | None = None
        self.history: list[tuple[str, str]] = []
        #: Pairs that ever entered the history (it keeps the last MAX_HISTORY_PAIRS), for `history_window`.
        self.history_total = 0
        self.pending_prefix = ""
        self.source_lang = ""
        self.target_lang = ""

    def start(
        self,
        history: Sequence[tuple[str, str]],
        accepted_target_prefix: str,
        source_lang: str,
        target_lang: str,
    ) -> None:
        """The session's init: the history it brings, and the target its first utterance continues."""
        self.history = list(history)
        self.history_total = len(self.history)
        self.pending_prefix = accepted_target_prefix
        self.source_lang = source_lang
        self.target_lang = target_lang

    def route(self, update: Update) -> Utterance | Translation | Error:
        """The utterance `update` belongs to, opening or closing utterances as its id says;
        or, for an update that has none, the answer to send it."""
        uid = update.utterance_id
        if self.open is not None and uid == self.open.id:
            return self.open
        expected = self.open.id if self.open is not None else self.next_id
        after_dropped = self.dropped_final is not None and uid == self.dropped_final + 1
        if expected is None or uid in (expected, expected + 1) or after_dropped:
            if self.dropped_final is not None and uid > self.dropped_final:
                self.dropped_final = None
            if self.open is not None:
                self.close(self.open, (), forced=False)  # abandoned: no final pass
            self.open = Utterance(uid, committed=self.pending_prefix)
            self.pending_prefix = ""
            return self.open
        closed = self.last_closed
        if closed is not None and closed.forced and uid == closed.id:
            # Sent before the client saw the rollover: tell it again.
            return Translation(update.seq, uid, True, closed.text, "", "", closed.covered, "final", True)
        return Error(
            ErrorCode.BAD_PROTOCOL,
            f"utterance_id {uid} is neither the open utterance ({expected}) nor the next one",
            seq=update.seq,
        )

    def strip_carry_over(self, update: Update) -> tuple[Word, ...]:
        closed, words = self.last_closed, update.words
        if closed is None or not closed.forced or update.utterance_id != closed.id + 1:
            return words
        n = len(closed.words)
        if n and tuple(w.text for w in words[:n]) == closed.words:
            return words[n:]
        return words

    def close(self, utt: Utterance, words: tuple[str, ...], *, forced: bool) -> None:
        """Close `utt`: it enters the history, and the next update must use id + 1.

        Not a translation that copies its source: in the prompt it teaches the model to
        copy, and the next utterances then stay English too (IWSLT dev talks, 0.5B).
        """
        if words and utt.committed and not copies_source(words, utt.committed, self.target_lang):
            # Written as running text (no spaces between Chinese characters), as the prompt's
            # own source reads and as a client's history would.
            self.history.append((word_separator(self.source_lang).join(words), utt.committed))
            self.history_total += 1
            del self.history[:-MAX_HISTORY_PAIRS]
        self.last_closed = ClosedUtterance(utt.id, words, utt.committed, utt.covered, forced)
        self.next_id = utt.id + 1
        self.open = None
