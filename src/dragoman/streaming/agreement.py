"""Target words whose form depends on the word after them.

An article agrees with its noun: Italian "della" or German "der" fixes a gender and a
case, English "a" or "an" the next word's first sound. Committed at the end of a
partial translation, such a word binds the rest before the source has said what the
noun is. With the 1.5B, "Tuttavia, a causa della" (the source still at "because of
the slow") was finished in English, "slow communication channels,", in every run;
"Tuttavia, a causa" was finished "dei canali di comunicazione lenti,". Held until the
word it agrees with is committable, an article is shown with it; an utterance that opens
with one shows its first text later (0.1-0.25 s at the p50, bench/history/2026-12-06_articles.md).

The lists hold articles and the contractions of a preposition with an article, as
written in lower case; a language without such words (Chinese) has none.
"""

from __future__ import annotations

from collections.abc import Mapping

from dragoman.languages import primary_subtag

_ITALIAN_ARTICLES = ("il", "lo", "la", "i", "gli", "le", "un", "uno", "una")
# di, a, da, in, su (and con's col, coi) fused with each definite article.
_ITALIAN_CONTRACTIONS = (
    *(
        stem + ending
        for stem in ("de", "a", "da", "ne", "su")
        for ending in ("l", "llo", "lla", "i", "gli", "lle")
    ),
    "col",
    "coi",
)

_GERMAN_ARTICLES = (
    "der", "die", "das", "den", "dem", "des",
    "ein", "eine", "einen", "einem", "einer", "eines",
    "kein", "keine", "keinen", "keinem", "keiner", "keines",
)  # fmt: skip
_GERMAN_CONTRACTIONS = ("am", "ans", "beim", "im", "ins", "vom", "zum", "zur")

AGREEING_WORDS: Mapping[str, frozenset[str]] = {
    "it": frozenset(_ITALIAN_ARTICLES + _ITALIAN_CONTRACTIONS),
    "de": frozenset(_GERMAN_ARTICLES + _GERMAN_CONTRACTIONS),
    "en": frozenset(("a", "an")),
}


def agrees_with_next(unit: str, target_lang: str) -> bool:
    """Whether the target unit `unit` (a word as drafted, with its leading space) is an
    article or article contraction of `target_lang`. A unit carrying punctuation
    ("della,") closes a phrase, so it is not one."""
    words = AGREEING_WORDS.get(primary_subtag(target_lang))
    return words is not None and unit.strip().lower() in words
