"""Language codes as the protocols carry them ("en", "en-US", "zh_Hans"), reduced to what the
engines key on: the primary subtag of BCP 47 (ISO 639-1 for the languages served); and the
scripts written without spaces, which decide how two pieces of text join."""

from __future__ import annotations

import unicodedata

#: Languages written without spaces between words: a prompt joins their source words
#: without one, and the MT policy counts their target text in characters or jieba's words.
UNSEGMENTED_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my"})


def primary_subtag(code: str) -> str:
    """The primary subtag of a language code, lower-cased: "en-US" -> "en", "zh_Hans" -> "zh"."""
    return code.strip().replace("_", "-").split("-")[0].lower()


def is_unsegmented(code: str) -> bool:
    """Whether `code`'s language is written without spaces between words."""
    return primary_subtag(code) in UNSEGMENTED_LANGS


#: Unicode character names of the scripts written without spaces between words (Chinese,
#: Japanese, Thai, Lao, Khmer, Myanmar), with their punctuation and fullwidth forms. Hangul is
#: not among them: Korean puts spaces between words.
_UNSPACED_NAMES = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "BOPOMOFO",
    "IDEOGRAPHIC",
    "FULLWIDTH",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
)


def unspaced_char(char: str) -> bool:
    """Whether `char` belongs to a script written without spaces between words."""
    if not char:
        return False
    if "\u3000" <= char <= "\u303f":  # CJK symbols and punctuation
        return True
    return unicodedata.name(char, "").startswith(_UNSPACED_NAMES)


def word_joiner(before: str, after: str) -> str:
    """What goes between two pieces of running text: a space, except where either is empty,
    already has one at the join, or meets a script written without spaces there."""
    if not before or not after or before[-1].isspace() or after[0].isspace():
        return ""
    return "" if unspaced_char(before[-1]) or unspaced_char(after[0]) else " "
