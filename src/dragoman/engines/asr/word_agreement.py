"""The stable prefix kept on the client side, for an ASR server that cannot be made to start
its text with one (OpenAI's `/v1/audio/transcriptions` has no such field).

The re-decode policy (`sessions/speech/decoder.py`) asks each step for a hypothesis that starts
with the stable prefix, the head of the previous hypothesis that was already sent to the
client as firm text. A local engine forces it into the decoder; a remote one transcribes the
window afresh. `agree` then keeps the prefix as it is and aligns the new hypothesis with it,
word by word (LocalAgreement between consecutive hypotheses): where the prefix's last words
are found in the new hypothesis, the words after them are the continuation; the result is the
prefix and that continuation, so the text a step returns always starts with the prefix, as
the contract (`engines/asr/base.py`) wants, and no firm word is ever taken back.

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


def agree(prefix: str, hypothesis: str) -> Agreement:
    """`prefix`, then what `hypothesis` says after the words that match the prefix's end.

    The words are aligned on their normalised forms (`normalized`). The continuation starts
    after the hypothesis word matched to the prefix's last matched word; prefix words after
    that one that found no match are taken to have been heard differently, one for one, so the
    hypothesis words in their place are skipped too.
    """
    hyp = split_words(hypothesis)
    pre = split_words(prefix) if prefix.strip() else []
    pairs: list[tuple[int, int]] = []
    cut = 0
    if pre:
        matcher = SequenceMatcher(
            None, [normalized(w) for w in pre], [normalized(w) for w in hyp], autojunk=False
        )
        blocks = [block for block in matcher.get_matching_blocks() if block.size]
        starts = _starts(pre, 0)
        for block in blocks:
            pairs += [(starts[block.a + k], block.b + k) for k in range(block.size)]
        if blocks:
            last = blocks[-1]
            cut = last.b + last.size + len(pre) - (last.a + last.size)
        else:
            cut = len(pre)
        cut = min(cut, len(hyp))
    # The words keep the hypothesis's own spaces: a continuation never starts at its first word
    # (at least one word stands for the prefix), so it brings the space before it along.
    tail_words = hyp[cut:]
    tail = "".join(tail_words)
    pairs += [(at, cut + k) for k, at in enumerate(_starts(tail_words, len(prefix)))]
    return Agreement(prefix + tail, tuple(pairs), len(pre) - len([p for p in pairs if p[0] < len(prefix)]))


def _starts(words: Sequence[str], start: int) -> list[int]:
    """The offset of each of `words` laid end to end from `start`."""
    out = []
    for word in words:
        out.append(start)
        start += len(word)
    return out
