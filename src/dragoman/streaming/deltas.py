"""Append-only transcript deltas.

OpenAI's `conversation.item.input_audio_transcription.delta` events are
concatenated by clients, so what was sent can never be taken back. The bug to
avoid, seen in a reference server: cutting the record of what was sent back to the common
prefix and re-sending the tail turns "word" + a revision to "world is" into
"wordld is". Instead, only text that is firm is sent (the hypothesis minus its
unstable tail), and a revision that reaches into sent text is left as sent: the
partial and completed events carry the whole hypothesis, and `completed` is the truth.

After a revision the ledger maps what was sent onto the new hypothesis: the sent
words that the hypothesis no longer has stand for the new words in their place (up to
where the two agree again, or, where nothing sent follows the revised words, for about
as much text), and deltas go on from the end of that span. So "Jingle" revised to
"Jingo poem which" sends " poem which" next: the client reads "Jingle poem which",
one word off, instead of a transcript that stops at "Jingle" until the item completes.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

#: Scripts written without spaces (CJK ideographs and punctuation, kana, full-width
#: forms): each character counts as a word.
_UNSPACED = "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
#: A word with the whitespace before it; the words of a text join back to it (bar
#: trailing whitespace, which firm text never has).
_WORD = re.compile(rf"\s*(?:[{_UNSPACED}]|[^\s{_UNSPACED}]+)")


@dataclass
class DeltaLedger:
    """What has been sent for one item, and which hypothesis text it stands for."""

    #: The concatenation of every delta sent for the item.
    sent: str = ""
    #: The hypothesis text that `sent` stands for: `sent` itself until a revision, then
    #: `sent` with the revised words replaced by the hypothesis' words in their place.
    basis: str = ""
    #: Steps whose firm text contradicted what had been sent.
    revisions: int = 0

    def advance(self, firm: str) -> str:
        """The delta that extends `sent` as `firm` extends `basis`, or "" when it does not.

        A `firm` that contradicts `basis` counts one revision; `basis` is then mapped onto
        `firm` (`_remap`), and what `firm` has beyond the revised words is sent at once.
        """
        if not firm.startswith(self.basis):
            if self.basis.startswith(firm):
                # Shorter but agreeing is no revision: the stable part merely shrank
                # (e.g. a cut that backed off further).
                return ""
            self.revisions += 1
            basis = _remap(self.basis, firm)
            if basis is None:
                return ""  # the hypothesis does not yet reach as far as what was sent
            self.basis = basis
        delta = firm[len(self.basis) :]
        self.sent += delta
        self.basis = firm
        return delta


def _remap(basis: str, firm: str) -> str | None:
    """The prefix of `firm` that stands for all of `basis`, which `firm` revises.

    Both share their words up to the first that differs. After it, `basis`'s words are
    aligned with `firm`'s: if `basis` ends on words `firm` has too (the hypothesis agrees
    again beyond the revised words), the span ends after them in `firm`. Otherwise the
    revised tail is taken to stand for the run of `firm`'s words closest to it in length,
    the same audio heard as other words; None while `firm` has less text than that tail.
    """
    old, new = _words(basis), _words(firm)
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    old_tail, new_tail = old[same:], new[same:]
    head = sum(len(word) for word in new[:same])
    if not old_tail:
        return firm[:head]  # `basis` differed only in whitespace after its last word
    key_old = [word.strip().casefold() for word in old_tail]
    key_new = [word.strip().casefold() for word in new_tail]
    blocks = difflib.SequenceMatcher(None, key_old, key_new, autojunk=False).get_matching_blocks()
    # The last block is the (len, len, 0) sentinel; the one before it is the last agreement.
    last = blocks[-2] if len(blocks) > 1 else None
    if last is not None and last.a + last.size == len(old_tail):
        return firm[: head + sum(len(word) for word in new_tail[: last.b + last.size])]
    # The revised words run to the end of what was sent: from the last agreement (or the
    # first difference), match their length with whole words of `firm`.
    old_from, new_from = (last.a + last.size, last.b + last.size) if last is not None else (0, 0)
    want = sum(len(word) for word in old_tail[old_from:])
    start = head + sum(len(word) for word in new_tail[:new_from])
    ends = _ends(new_tail[new_from:], start)
    if not ends or ends[-1] - start < want:
        return None
    # Closest in length; a tie goes to the shorter span, which sends a word twice rather
    # than leaving one out.
    end = min(ends, key=lambda at: abs(at - start - want))
    return firm[:end]


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _ends(words: list[str], start: int) -> list[int]:
    """Where each of `words` ends, counted in the text they follow from `start`."""
    ends: list[int] = []
    at = start
    for word in words:
        at += len(word)
        ends.append(at)
    return ends
