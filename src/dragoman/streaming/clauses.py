"""Cutting a stream of LLM text into clauses that TTS can speak as they arrive.

A voice agent speaks "clause by clause as the text arrives, so the first audio does
not wait for the whole answer". The cutter is pure: text pieces in, clauses out,
no clock. It cuts

- after a sentence end (`.`, `!`, `?`, `…`, and the CJK `。！？`) that is followed by
  white space, or by anything for the CJK marks, which take no space after them;
- after a clause mark (`,`, `;`, `:`, and the CJK `，；：`) once the clause holds
  `min_chars` characters, so a list of short items is not spoken word by word;
- at white space once a clause runs past `max_chars` with no mark at all.

The first clause of an answer may be shorter (`first_min_chars`): the first audio
is what the user waits for. A period inside a number (3.5), an abbreviation (Dr.,
e.g.) or an initial is not a sentence end. `finish()` returns what is left.

`speakable()` drops what a TTS voice would read out literally and a listener would
not expect: Markdown emphasis and headings, code fences, bullets. The voice agent
uses the speakable text as the assistant's transcript too, so the transcript is
exactly what was spoken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE_END = frozenset(".!?…")
_CJK_SENTENCE_END = frozenset("。！？")
_CLAUSE_MARK = frozenset(",;:")
_CJK_CLAUSE_MARK = frozenset("，；：、")
#: Words whose trailing period does not end a sentence (lower case, without the period).
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "a.m", "p.m"}
    | {"no", "approx", "dept", "fig", "inc", "ltd", "co"}
)

_MARKDOWN = [
    (re.compile(r"```[a-zA-Z0-9_-]*"), ""),  # code fences
    (re.compile(r"(?m)^\s{0,3}#{1,6}\s+"), ""),  # headings
    (re.compile(r"(?m)^\s*(?:[-*+•]|\d+[.)])\s+"), ""),  # bullets and numbered lists
    (re.compile(r"\*\*|__|\*|`"), ""),  # emphasis, inline code
]


def speakable(text: str) -> str:
    """`text` without the Markdown a voice would read out (`**`, `#`, fences, bullets), its
    white space collapsed to single spaces."""
    for pattern, replacement in _MARKDOWN:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


@dataclass
class ClauseCutter:
    """Text pieces in (`push`), whole clauses out; `finish` flushes the rest."""

    first_min_chars: int = 12
    min_chars: int = 40
    max_chars: int = 160

    def __post_init__(self) -> None:
        self._pending = ""
        self._cut_any = False

    def push(self, piece: str) -> list[str]:
        """The clauses `piece` completes, in order (each with its trailing space trimmed)."""
        self._pending += piece
        clauses: list[str] = []
        while (cut := self._find_cut()) is not None:
            clause, self._pending = self._pending[:cut], self._pending[cut:]
            clause = clause.strip()
            if clause:
                clauses.append(clause)
                self._cut_any = True
        return clauses

    def finish(self) -> str:
        """What is left, as the last clause ("" when nothing is)."""
        rest, self._pending = self._pending.strip(), ""
        return rest

    def _find_cut(self) -> int | None:
        """The end of the first complete clause in the pending text, or None."""
        text = self._pending
        least = self.min_chars if self._cut_any else self.first_min_chars
        for i, char in enumerate(text):
            if char in _CJK_SENTENCE_END or (char in _CJK_CLAUSE_MARK and i + 1 >= least):
                return i + 1
            if i + 1 >= len(text) or not text[i + 1].isspace():
                continue  # a Latin mark ends a clause only before white space (3.5, e.g.x)
            if char in _SENTENCE_END and not self._abbreviation(text, i):
                return i + 1
            if char in _CLAUSE_MARK and i + 1 >= least:
                return i + 1
        if len(text) > self.max_chars:
            space = text.rfind(" ", 0, self.max_chars)
            return space + 1 if space > 0 else self.max_chars
        return None

    @staticmethod
    def _abbreviation(text: str, dot: int) -> bool:
        """A period that ends an abbreviation or an initial ("Dr.", "e.g.", "J.")."""
        if text[dot] != ".":
            return False
        start = dot
        while start > 0 and not text[start - 1].isspace():
            start -= 1
        word = text[start:dot].lower().lstrip("(\"'")
        return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())
