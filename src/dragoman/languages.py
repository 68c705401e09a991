"""Language codes as the protocols carry them ("en", "en-US", "zh_Hans"), reduced to what the
engines key on: the primary subtag of BCP 47 (ISO 639-1 for the languages served)."""

from __future__ import annotations

#: Languages written without spaces between words: a prompt joins their source words
#: without one, and the MT policy counts their target text in characters or jieba's words.
UNSEGMENTED_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my"})


def primary_subtag(code: str) -> str:
    """The primary subtag of a language code, lower-cased: "en-US" -> "en", "zh_Hans" -> "zh"."""
    return code.strip().replace("_", "-").split("-")[0].lower()


def is_unsegmented(code: str) -> bool:
    """Whether `code`'s language is written without spaces between words."""
    return primary_subtag(code) in UNSEGMENTED_LANGS
