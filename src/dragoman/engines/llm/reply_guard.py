"""A spoken reply kept whole and short: its repetition loop cut before it is said, and its end
found at a sentence boundary once it is long enough.

Greedy decoding on a small model sometimes never reaches its end-of-turn token: it
repeats a sentence ("Beijing is the capital. Beijing is the capital. …") or a phrase
until the token limit, and the response ends `incomplete` with the loop spoken. The
loop is the tail of the reply's tokens that repeats with a short period, as in
Whisper's and the MT drafts' output (`engines.repetition`). A streamed reply cannot
take back what was said, so `ReplyGuard` holds back the tokens that repeat the text
one period before them (for ordinary text one or two tokens, while a word such as
" the" recurs) and releases them as soon as the repetition breaks. Once two copies of
a period make a loop, the held copy is dropped and the reply ends there, complete.

A voice answer also has a length past which it is rambling ("The capital of China is
Beijing. Its friends include Shanghai, Guangzhou, …"). Past `answer_tokens` the reply
ends at the next sentence end instead of running into the hard token limit, so the
user hears whole sentences and the response completes. The sentence in progress is
held back meanwhile; one that has not ended `ANSWER_GRACE` tokens later is dropped
back to the last sentence (or clause) end. A client that sets its own
`max_output_tokens` gets no such soft end (the request then carries none).

Qwen2.5 writes numbers one digit a token, so "1,000,000" would be a loop of ",000": a
digit is compared by its place in its number, and a number repeats only as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dragoman.engines.repetition import loop_start

#: Text that ends a sentence: terminal punctuation, then closing quotes or brackets.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*$")
#: CJK terminal punctuation ends a sentence with no space after it.
_CJK_SENTENCE_END = re.compile(r"[。！？][」』”’）]*$")
_CLAUSE_END = re.compile(r"[,;:.!?…，、；：。！？]\s*$")
#: Tokens past `answer_tokens` a sentence may take to end before the reply is cut back to the
#: last sentence (or clause) end: a long sentence, not a list that runs on.
ANSWER_GRACE = 32


@dataclass(frozen=True)
class Step:
    """What to do after a token: say `release` (tokens, oldest first), and whether the reply ends."""

    release: tuple[int, ...] = ()
    #: The reply ended at a sentence end before this token: the token is not part of it.
    ended: bool = False
    #: A loop was found: the reply keeps its first `keep` tokens; the rest were never said.
    keep: int | None = None


class ReplyGuard:
    """Feed a reply's tokens one at a time; get what may be said, and where the reply ends."""

    def __init__(self, text_of: Callable[[int], str], *, answer_tokens: int | None = None) -> None:
        self._text_of = text_of
        self._answer_tokens = answer_tokens
        self._tokens: list[int] = []
        #: `_tokens` as the loop finder compares them (`_key`).
        self._keys: list[int] = []
        self._released = 0
        self._text = ""
        #: Where each token's text ends in `_text`.
        self._ends: list[int] = []
        #: Digit tokens' keys by (token, place in its number), and the place of the next one.
        self._digit_keys: dict[tuple[int, int], int] = {}
        self._number_at = 0

    @property
    def tokens(self) -> list[int]:
        """The reply so far, held tokens included."""
        return list(self._tokens)

    def feed(self, token: int) -> Step:
        piece = self._text_of(token)
        soft = self._answer_tokens
        if soft is not None and len(self._tokens) >= soft and self._sentence_ends_before(piece):
            return Step(release=self.flush(), ended=True)
        self._tokens.append(token)
        self._keys.append(self._key(token, piece))
        self._text += piece
        self._ends.append(len(self._text))
        cut = loop_start(self._keys, 0, at_limit=True, clause_end=self._clause_end)
        if cut is not None:
            return self._end_at(max(cut, self._released))
        if soft is not None and len(self._tokens) >= soft + ANSWER_GRACE:
            return self._end_at(self._last_end())
        upto = len(self._tokens) - _repeating_tail(self._keys)
        if soft is not None:
            # Past the answer's length the sentence in progress is said only once it ends.
            upto = min(upto, max(soft, self._released))
        release = tuple(self._tokens[self._released : upto]) if upto > self._released else ()
        self._released = max(self._released, upto)
        return Step(release=release)

    def _key(self, token: int, piece: str) -> int:
        """The token as the loop finder sees it: a digit is keyed by its place in its number, so
        "1,000,000" repeats nothing while "1000. 1000. 1000." still loops."""
        if _is_digits(piece):
            key = self._digit_keys.setdefault((token, self._number_at), -len(self._digit_keys) - 1)
            self._number_at += 1
            return key
        self._number_at = self._number_at + 1 if self._number_at and piece in (",", ".") else 0
        return token

    def flush(self) -> tuple[int, ...]:
        """Release every held token: the reply ends here without a loop."""
        release = tuple(self._tokens[self._released :])
        self._released = len(self._tokens)
        return release

    def _end_at(self, keep: int) -> Step:
        release = tuple(self._tokens[self._released : keep])
        self._released = keep
        del self._tokens[keep:], self._keys[keep:], self._ends[keep:]
        self._text = self._text[: self._ends[-1]] if self._ends else ""
        return Step(release=release, keep=keep)

    def _last_end(self) -> int:
        """The longest held-back reply that ends a sentence, else a clause; else what was said."""
        said = self._released
        for pattern in (_SENTENCE_END, _CLAUSE_END):
            for k in range(len(self._tokens), said, -1):
                if pattern.search(self._text[: self._ends[k - 1]].rstrip()):
                    return k
        return said

    def _sentence_ends_before(self, piece: str) -> bool:
        text = self._text.rstrip(" \t")
        if not text:
            return False
        if text.endswith("\n") or _CJK_SENTENCE_END.search(text):
            return True
        return bool(_SENTENCE_END.search(text)) and (piece[:1].isspace() or not piece)

    def _clause_end(self, key: int) -> bool:
        return key >= 0 and bool(_CLAUSE_END.search(self._text_of(key)))


def _is_digits(piece: str) -> bool:
    stripped = piece.strip()
    return bool(stripped) and stripped.isdigit()


def _repeating_tail(keys: list[int]) -> int:
    """The longest tail of `keys` that equals the keys some period before it."""
    n, best = len(keys), 0
    for period in range(1, n):
        run = 0
        while run < n - period and keys[n - 1 - run] == keys[n - 1 - run - period]:
            run += 1
        best = max(best, run)
    return best
