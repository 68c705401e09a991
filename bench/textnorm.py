"""Text normalisation for WER (eval/README.md: lower-case, drop punctuation, spell numbers alike)."""

from __future__ import annotations

import re
import unicodedata

import jiwer
from num2words import num2words

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_PUNCT = re.compile(r"[^\w\s']|_")


def normalize(text: str, language: str = "en") -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = _NUMBER.sub(lambda m: " " + _spell(m.group(0), language) + " ", text)
    text = text.replace("-", " ")
    text = _PUNCT.sub(" ", text)
    text = text.replace("'", "")
    return " ".join(text.split())


def _spell(number: str, language: str) -> str:
    try:
        value: float | int = (
            float(number.replace(",", ".")) if ("." in number or "," in number) else int(number)
        )
        return str(num2words(value, lang=language))
    except (NotImplementedError, OverflowError, ValueError):
        return number


def wer(references: list[str], hypotheses: list[str], language: str = "en") -> float:
    """Corpus WER of normalised texts (character error rate for zh/ja, which have no spaces)."""
    refs = [normalize(r, language) for r in references]
    hyps = [normalize(h, language) for h in hypotheses]
    if language in ("zh", "ja"):
        return float(jiwer.cer(refs, hyps))
    return float(jiwer.wer(refs, hyps))
