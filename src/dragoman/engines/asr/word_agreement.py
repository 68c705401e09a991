"""The stable prefix kept on the client side, for an ASR server that cannot be made to start
its text with one (OpenAI's `/v1/audio/transcriptions` has no such field).

The re-decode policy (`sessions/speech/decoder.py`) asks each step for a hypothesis that starts
with the stable prefix, the head of the previous hypothesis that was already sent to the
client as firm text. A local engine forces it into the decoder; a remote one transcribes the
window afresh. `agree` then keeps the prefix as it is and aligns the new hypothesis with it,
word by word (LocalAgreement between consecutive hypotheses): where the prefix's last words
are found in the new hypothesis, the words after them are the continuation; the result is the
prefix and that continuation, so the text a step returns always starts with the prefix, as
the contract (`engines/asr/base.py`) wants, and no firm word is ever taken back. Prefix words
a transcript does not repeat (`by_letters`) were either heard otherwise (the hypothesis words
spelt like them stand in their place) or not heard at all: Whisper often skips the first words
of a window that a seal cut just before them, and the continuation then starts at once, so that
nothing the hypothesis heard after them is dropped.

Text is cut into words, not model tokens: a remote server does not share its tokenizer, so
`WordTokenizer` gives the policy words to count (`unfixed_tokens` is then words, about 1.3
Whisper tokens each in English) and CJK characters one by one, since those scripts have no
spaces.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

#: Scripts written without spaces: each character is a word of its own.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
#: A word: its leading whitespace, then one unspaced character or a run of anything else that
#: is not a space. Joined, the words give back the text exactly.
_WORD = re.compile(rf"\s*(?:[{_UNSPACED}]|[^\s{_UNSPACED}]+)|\s+$")
#: Text that starts with a word of a spaced script (a space goes before it after other words).
_SPACED = re.compile(rf"[^\s{_UNSPACED}]")
#: How alike (difflib's ratio of their letters) hypothesis words must be to prefix words they
#: did not match to stand for them, heard otherwise; random words of a length score ~0.2-0.4.
HEARD_AS_SIMILARITY = 0.5


def split_words(text: str) -> list[str]:
    """`text` cut into words, each with its leading whitespace; `"".join` gives `text` back."""
    return _WORD.findall(text)


def normalized(word: str) -> str:
    """A word as compared: lower case, without punctuation or accents' combining marks."""
    folded = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in folded if ch.isalnum())


class WordTokenizer:
    """A `TextTokenizer` whose tokens are words (`split_words`).

    Ids index a vocabulary that grows as words are first seen; it is shared by every session
    of the server (its size is that of the words heard), and guarded for the worker threads.
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = []
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        words = split_words(text)
        with self._lock:
            ids = []
            for word in words:
                known = self._ids.get(word)
                if known is None:
                    known = self._ids[word] = len(self._words)
                    self._words.append(word)
                ids.append(known)
            return ids

    def decode(self, ids: Sequence[int]) -> str:
        with self._lock:
            return "".join(self._words[i] for i in ids)


@dataclass(frozen=True)
class Agreement:
    """A step's text made to start with its prefix."""

    text: str
    #: (character offset in `text` of a word's leading space, the index of the hypothesis word
    #: it stands for), in text order: where the hypothesis's word timings land in `text`.
    words: tuple[tuple[int, int], ...]
    #: Words of the prefix the hypothesis did not confirm (0: it started with the prefix).
    disagreed: int


def agree(prefix: str, hypothesis: str, *, by_letters: bool = False) -> Agreement:
    """`prefix`, then what `hypothesis` says after the words that match the prefix's end.

    The words are aligned on their normalised forms (`normalized`). The continuation starts
    after the hypothesis word matched to the prefix's last matched word, and after the words
    that stand for the prefix words past that one: `by_letters` (a transcript of the same
    audio), the run of hypothesis words spelt most like them or none (`_heard_as`); otherwise
    (a re-translation, which may say them in other words) as many words as they are.
    """
    hyp = split_words(hypothesis)
    pre = split_words(prefix) if prefix.strip() else []
    pairs: list[tuple[int, int]] = []
    cut = 0
    if pre:
        pre_keys, hyp_keys = [normalized(w) for w in pre], [normalized(w) for w in hyp]
        matcher = SequenceMatcher(None, pre_keys, hyp_keys, autojunk=False)
        blocks = [block for block in matcher.get_matching_blocks() if block.size]
        starts = _starts(pre, 0)
        for block in blocks:
            pairs += [(starts[block.a + k], block.b + k) for k in range(block.size)]
        last = blocks[-1] if blocks else None
        matched_pre, matched_hyp = (last.a + last.size, last.b + last.size) if last else (0, 0)
        unmatched = pre_keys[matched_pre:]
        cut = matched_hyp + (_heard_as(unmatched, hyp_keys[matched_hyp:]) if by_letters else len(unmatched))
        cut = min(cut, len(hyp))
    tail_words = hyp[cut:]
    if prefix and tail_words and not prefix[-1].isspace():
        # A continuation that repeats none of the prefix starts at the hypothesis's first
        # word, which a server's text gives without the space that goes before it.
        tail_words[0] = with_space(tail_words[0])
    pairs += [(at, cut + k) for k, at in enumerate(_starts(tail_words, len(prefix)))]
    text = prefix + "".join(tail_words)
    return Agreement(text, tuple(pairs), len(pre) - len([p for p in pairs if p[0] < len(prefix)]))


def with_space(text: str) -> str:
    """`text` starting with one space, as Whisper starts each word of its own text, unless it is
    empty or starts in a script written without spaces. A server strips its transcript's
    leading space: the text of a window after sealed text needs it."""
    stripped = text.lstrip()
    return " " + stripped if _SPACED.match(stripped) else text


def _heard_as(unmatched: Sequence[str], following: Sequence[str]) -> int:
    """How many of the `following` hypothesis words stand for the `unmatched` prefix words
    (normalised): the run from the first whose letters are likest theirs, if it is alike
    (`HEARD_AS_SIMILARITY`): "up guards" heard as "upgards"; none when no run is, the words
    were not heard ("national as" before "a jingo poem"), so none is skipped."""
    if not unmatched:
        return 0
    want = "".join(unmatched)
    best, best_ratio = 0, HEARD_AS_SIMILARITY
    heard = ""
    for count, word in enumerate(following, start=1):
        heard += word
        ratio = SequenceMatcher(None, want, heard, autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = count, ratio
        if len(heard) > 2 * len(want):
            break  # longer runs are less alike still
    return best


def _starts(words: Sequence[str], start: int) -> list[int]:
    """The offset of each of `words` laid end to end from `start`."""
    out = []
    for word in words:
        out.append(start)
        start += len(word)
    return out
