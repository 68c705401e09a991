"""Word error rate, computed one way by every test and benchmark.

Both sides go through Whisper's text normalisers first, as the eval set's README asks
("lower-case them, drop punctuation and spell numbers the same way on both sides"): the
English one (which also writes numbers as digits and expands contractions) for English,
the basic one (lower case, no punctuation or symbols) for the others. Chinese and Japanese
are written without spaces, so they are scored by characters instead (CER).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from transformers.models.whisper.english_normalizer import BasicTextNormalizer, EnglishTextNormalizer

#: Languages scored by characters.
BY_CHARACTERS = frozenset({"zh", "ja"})


@cache
def _english() -> EnglishTextNormalizer:
    return EnglishTextNormalizer({})  # type: ignore[no-untyped-call]


@cache
def _basic() -> BasicTextNormalizer:
    return BasicTextNormalizer()


def normalize(text: str, language: str = "en") -> str:
    normalizer = _english() if language == "en" else _basic()
    return " ".join(str(normalizer(text)).split())


def units(text: str, language: str = "en") -> list[str]:
    """What errors are counted in: the normalised words, or characters for zh and ja."""
    normalized = normalize(text, language)
    return list(normalized.replace(" ", "")) if language in BY_CHARACTERS else normalized.split()


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Substitutions, deletions and insertions that turn `reference` into `hypothesis`."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i]
        for j, hyp in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def wer(references: Sequence[str], hypotheses: Sequence[str], language: str = "en") -> float:
    """Corpus error rate: all edits over all reference units (CER for zh and ja)."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references for {len(hypotheses)} hypotheses")
    edits = total = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        ref = units(reference, language)
        edits += edit_distance(ref, units(hypothesis, language))
        total += len(ref)
    if total == 0:
        raise ValueError("the references are empty")
    return edits / total
