"""Tokens a translation into a Latin-script language never chooses: those of East Asian scripts.

The 1.5B sometimes leaves a Chinese name or term untranslated inside English ("the captured
Islamic武装分子's prison", FLORES zh→en, docs/mt.md): the listener can neither read nor hear
it (the English voice has no Chinese), so it is a translation lost. Greedy choice among the
other tokens gives the model's next best, a transliteration or a translation.

A token is excluded when its bytes hold a UTF-8 lead byte of U+3000-U+DFFF: CJK symbols and
punctuation, kana, CJK ideographs, Hangul. Qwen's byte-level vocabulary also has byte pieces;
excluding the lead bytes keeps a character of those scripts from starting at all, while the
two-byte letters of German and Italian (ä, è: lead bytes 0xC3) and the punctuation of
U+2000-U+2FFF (curly quotes, dashes, €: lead byte 0xE2) stay.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

#: Targets written in the Latin script: no East Asian token in their translations.
LATIN_SCRIPT_TARGETS = frozenset({"de", "en", "es", "fr", "it", "nl", "pt"})

#: UTF-8 lead bytes of the three-byte characters U+3000-U+DFFF.
_EAST_ASIAN_LEADS = frozenset(range(0xE3, 0xEE))


def east_asian_tokens(piece: Callable[[int], bytes], n_vocab: int) -> npt.NDArray[np.bool_]:
    """A mask over the vocabulary: True for each token whose bytes start an East Asian character."""
    mask = np.zeros(n_vocab, np.bool_)
    for token in range(n_vocab):
        if not _EAST_ASIAN_LEADS.isdisjoint(piece(token)):
            mask[token] = True
    return mask


class TargetScript:
    """The excluded tokens of each target language, built once per engine on first use."""

    def __init__(self, piece: Callable[[int], bytes], n_vocab: int) -> None:
        self._piece = piece
        self._n_vocab = n_vocab
        self._east_asian: npt.NDArray[np.bool_] | None = None

    def excluded(self, target_lang: str) -> npt.NDArray[np.bool_] | None:
        """The mask of tokens a translation into `target_lang` never chooses; None: any token."""
        if target_lang not in LATIN_SCRIPT_TARGETS:
            return None
        if self._east_asian is None:
            self._east_asian = east_asian_tokens(self._piece, self._n_vocab)
        return self._east_asian
