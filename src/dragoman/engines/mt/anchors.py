"""Alignments that can be trusted without an aligner, for choosing alignment heads.

Strings that appear once in the source and once in the reference translation,
identically: numbers (compared by their digits, so 77.8 = 77,8), capitalised
names, and longer identical words (ignoring case, so computer = Computer). And
the reference's sentence-final mark, which belongs to the last source word when
the source ends with one too: the end of a translation should wait for the end
of the source. English function words that are also words of the target
languages (in, die, war ...) never count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: English function words that are also words of the target languages (In, Die, So, Was ...).
_STOP_WORDS = """a about after all also am an and any are as at be been but by can could did do does for from
    had has have he her here him his how i if in into is it its just man may me more most my no not
    now of on one or our out over she so some than that the their them then there these they this those
    to too up us was we were what when where which who why will with would you your die war"""
_STOP = frozenset(_STOP_WORDS.split())

_RUN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")


def _keys(run: str, sentence_initial: bool) -> list[str]:
    """Match keys of an alphanumeric run: "#digits", "=Exact" (names), "~lower" (long words)."""
    if run[0].isdigit():
        return ["#" + "".join(c for c in run if c.isdigit())]
    if run.lower() in _STOP or len(run) < 2:
        return []
    keys = []
    if run[0].isupper() and (len(run) >= 3 or not sentence_initial):
        keys.append("=" + run)
    if len(run) >= 5:
        keys.append("~" + run.lower())
    return keys


_SENTENCE_END = ".?!。？！"
_CLOSERS = " \"'”“»«’)]」』"


def _final_punctuation(source_words: Sequence[str], target_text: str) -> int | None:
    """Index in `target_text` of its sentence-final mark when the source ends with one too."""
    if not source_words or source_words[-1].rstrip(_CLOSERS)[-1:] not in tuple(_SENTENCE_END):
        return None
    stripped = target_text.rstrip(_CLOSERS)
    if not stripped or stripped[-1] not in _SENTENCE_END:
        return None
    return len(stripped) - 1


def find_anchors(
    source_words: Sequence[str], target_text: str, token_spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """(target token index, source word index) pairs that can be trusted to align.

    Strings shared verbatim, each key occurring exactly once on each side; the
    target token is the first one overlapping the target run (the one that
    commits to the word). Also the target's sentence-final mark to the last
    source word when both sentences end with one: the end of a translation
    should wait for the end of the source.
    """

    def token_at(start: int, end: int) -> int | None:
        return next((i for i, (a, b) in enumerate(token_spans) if a < end and b > start), None)

    source_keys: dict[str, list[int]] = {}
    for index, word in enumerate(source_words):
        for match in _RUN.finditer(word):
            for key in _keys(match.group(), sentence_initial=index == 0 and match.start() == 0):
                source_keys.setdefault(key, []).append(index)
    target_keys: dict[str, list[tuple[int, int]]] = {}
    for match in _RUN.finditer(target_text):
        initial = not target_text[: match.start()].strip(" \"'“„«‚")
        for key in _keys(match.group(), sentence_initial=initial):
            target_keys.setdefault(key, []).append(match.span())
    anchors: set[tuple[int, int]] = set()
    for key, words in source_keys.items():
        spans = target_keys.get(key, [])
        if len(words) != 1 or len(spans) != 1:
            continue
        token = token_at(*spans[0])
        if token is not None:
            anchors.add((token, words[0]))
    mark = _final_punctuation(source_words, target_text)
    if mark is not None:
        token = token_at(mark, mark + 1)
        if token is not None:
            anchors.add((token, len(source_words) - 1))
    return sorted(anchors)
