"""Tokens a translation never chooses: East Asian ones in a Latin-script language, a lowercase
Latin word in Chinese, and an opening quote the source does not have.

The 1.5B sometimes leaves a Chinese name or term untranslated inside English ("the captured
Islamic武装分子's prison", FLORES zh→en, docs/mt.md): the listener can neither read nor hear
it (the English voice has no Chinese), so it is a translation lost. Greedy choice among the
other tokens gives the model's next best, a transliteration or a translation.

A token is excluded when its bytes hold a UTF-8 lead byte of U+3000-U+DFFF: CJK symbols and
punctuation, kana, CJK ideographs, Hangul. Qwen's byte-level vocabulary also has byte pieces;
excluding the lead bytes keeps a character of those scripts from starting at all, while the
two-byte letters of German and Italian (ä, è: lead bytes 0xC3) and the punctuation of
U+2000-U+2FFF (curly quotes, dashes, €: lead byte 0xE2) stay.

A lowercase Latin word in Chinese. Offline, the 1.5B left one English word untranslated in 20 of
the first 100 FLORES lines into Chinese ("一种抗体 cocktail", "previously，瑞林公司的CEO",
"布雷泽inski"; 2026-12-07): the reader meets English mid-sentence and Kokoro's Chinese voice
cannot say it. The names and acronyms it keeps in Latin letters are capitalised (QVC, ZMapp,
Shark Tank, GHz), so what a Chinese translation may not choose is a token that starts a word
with a lowercase letter: after a space always, and with no space unless it goes on from a token
ending in a Latin letter (the "inov" of "Sim|inov", the "Hz" of "G|Hz"). The rule depends on
the token before, so it is a pair of masks (`LowercaseWords.after`).

An opening quote. Given the first words of a sentence, the 1.5B often opens its translation
with a quotation mark ("Throughout 1960s, Brzezinski" -> '"Von 1960'; 7 of 270 FLORES
partial drafts into German, Italian and Chinese, one of them over a quoted source), and every
later draft continues that prefix, so the caption opens a quote the speaker never did and
closes it at the end. The first target token of a source without any quotation mark may
therefore not start with one (`opening_quotes`, `quoted`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Targets written in the Latin script: no East Asian token in their translations.
LATIN_SCRIPT_TARGETS = frozenset({"de", "en", "es", "fr", "it", "nl", "pt"})

#: Targets written without the Latin alphabet: no lowercase Latin word in their translations.
LATIN_FREE_TARGETS = frozenset({"zh"})

#: Quotation marks of every style, opening and closing: straight, curly, low-9, guillemets and
#: CJK corner brackets. Single quotes are left out: they are apostrophes as often ("Ring's").
QUOTE_MARKS = frozenset('"\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a\u300c\u300d\u300e\u300f')

#: UTF-8 lead bytes of the three-byte characters U+3000-U+DFFF.
_EAST_ASIAN_LEADS = frozenset(range(0xE3, 0xEE))


def east_asian_tokens(piece: Callable[[int], bytes], n_vocab: int) -> npt.NDArray[np.bool_]:
    """A mask over the vocabulary: True for each token whose bytes start an East Asian character."""
    mask = np.zeros(n_vocab, np.bool_)
    for token in range(n_vocab):
        if not _EAST_ASIAN_LEADS.isdisjoint(piece(token)):
            mask[token] = True
    return mask


@dataclass(frozen=True)
class LowercaseWords:
    """The tokens that would start a lowercase Latin word, by what the token before ends in."""

    #: Whitespace, then a lowercase letter: a new word after any token.
    spaced: npt.NDArray[np.bool_]
    #: Those, and tokens that start with a lowercase letter: a new word unless the token before
    #: ends in a Latin letter.
    any_start: npt.NDArray[np.bool_]
    #: Tokens whose last byte is a Latin letter.
    ends_in_letter: npt.NDArray[np.bool_]

    def after(self, token: int) -> npt.NDArray[np.bool_]:
        """The tokens the choice after `token` may not be."""
        return self.spaced if self.ends_in_letter[token] else self.any_start


def lowercase_words(piece: Callable[[int], bytes], n_vocab: int) -> LowercaseWords:
    """The masks of `LowercaseWords` over the vocabulary."""
    spaced = np.zeros(n_vocab, np.bool_)
    bare = np.zeros(n_vocab, np.bool_)
    ends = np.zeros(n_vocab, np.bool_)
    for token in range(n_vocab):
        data = piece(token)
        if not data:
            continue
        text = data.lstrip()
        starts_lower = text[:1].isalpha() and text[:1].islower()  # bytes: ASCII letters only
        spaced[token] = starts_lower and len(text) < len(data)
        bare[token] = starts_lower and len(text) == len(data)
        ends[token] = data[-1:].isalpha()
    return LowercaseWords(spaced, spaced | bare, ends)


def quote_tokens(piece: Callable[[int], bytes], n_vocab: int) -> npt.NDArray[np.bool_]:
    """A mask over the vocabulary: True for each token whose text, after any leading space,
    starts with a quotation mark."""
    mask = np.zeros(n_vocab, np.bool_)
    for token in range(n_vocab):
        text = piece(token).decode("utf-8", errors="ignore").lstrip()
        mask[token] = bool(text) and text[0] in QUOTE_MARKS
    return mask


def quoted(words: Sequence[str]) -> bool:
    """Whether any source word holds a quotation mark (then a translation may open with one)."""
    return any(not QUOTE_MARKS.isdisjoint(word) for word in words)


class TargetScript:
    """The excluded tokens of each target language, built once per engine on first use."""

    def __init__(self, piece: Callable[[int], bytes], n_vocab: int) -> None:
        self._piece = piece
        self._n_vocab = n_vocab
        self._east_asian: npt.NDArray[np.bool_] | None = None
        self._quotes: npt.NDArray[np.bool_] | None = None
        self._lowercase: LowercaseWords | None = None

    def excluded(self, target_lang: str) -> npt.NDArray[np.bool_] | None:
        """The mask of tokens a translation into `target_lang` never chooses; None: any token."""
        if target_lang not in LATIN_SCRIPT_TARGETS:
            return None
        if self._east_asian is None:
            self._east_asian = east_asian_tokens(self._piece, self._n_vocab)
        return self._east_asian

    def lowercase_words(self, target_lang: str) -> LowercaseWords | None:
        """The lowercase-word rule of `target_lang`; None where Latin words are its own."""
        if target_lang not in LATIN_FREE_TARGETS:
            return None
        if self._lowercase is None:
            self._lowercase = lowercase_words(self._piece, self._n_vocab)
        return self._lowercase

    def prepare(self, targets: Iterable[str]) -> None:
        """Build every mask a translation into `targets` uses now (at the engine's warm-up), not
        on the first session's first draft: 0.19-0.3 s each on a 150k-token vocabulary."""
        for target in targets:
            self.excluded(target)
            self.lowercase_words(target)
        self.opening_quotes()

    def opening_quotes(self) -> npt.NDArray[np.bool_]:
        """The mask of tokens a translation of an unquoted source does not open with."""
        if self._quotes is None:
            self._quotes = quote_tokens(self._piece, self._n_vocab)
        return self._quotes
