"""Cutting a stream of LLM text into clauses that TTS can speak as they arrive.

A voice agent speaks "clause by clause as the text arrives, so the first audio does
not wait for the whole answer". The cutter is pure: text pieces in, clauses out,
no clock. It cuts

- after a sentence end (`.`, `!`, `?`, `…`, and the CJK `。！？`) that is followed by
  white space, or by anything for the CJK marks, which take no space after them;
- after a clause mark (`,`, `;`, `:`, and the CJK `，；：`) once the clause holds
  `min_chars` characters, so a list of short items is not spoken word by word;
- at white space once a clause runs past `max_chars` with no mark at all.

The first clause of an answer is cut sooner, because the first audio is what the user
waits for: at a clause mark once it holds `first_min_chars`, and, with no mark yet, at a word
boundary once it holds `first_max_words` words, or from `first_min_words` on before a word that
opens a phrase ("and", "of", "is", ...; German's, Italian's and Chinese's too, for the
interpreter's translations), where a speaker would take a breath anyway; Chinese words are
jieba's (the dictionary the Mandarin voice phonemises with). A spoken answer
(`ClauseCutter.spoken_answer()`, the voice agent's) cuts its first clause sooner still, after
two to four words: each word is about one LLM token, and the cut waits for the token after the
word, so the first audio comes a token or two sooner than with the defaults (the 1.5B made about
9 tokens a second with all three services on 2 cores, bench.agent_latency). A sentence end at
the very end of the text so far is cut at once, without waiting for the space after it, unless
it may still be part of a number, an abbreviation or an ellipsis. A period inside a number
(3.5), an abbreviation (Dr., e.g.) or an initial is not a sentence end. `finish()` returns what
is left.

Lengths are counted as speech, not as characters: a wide (CJK) character is a syllable,
spoken in about the time of `WIDE_CHAR_WEIGHT` Latin letters, so a Chinese clause may end
at a `，` after four characters, as an English one may after twelve letters, and a later one
after 14 characters, not 40 (most Chinese sentences are shorter than that). Text without
spaces is cut past `max_chars` where its length runs out, and its first clause may also end
where a pushed piece ended (an MT commit, an LLM token) once it holds `first_min_chars` of
speech (four characters) and the next piece has come; in Chinese only where one of jieba's
words ends too, so "近在|咫尺" stays whole. The Mandarin interpreter's first clause waited for
the first `，` before, then for six characters, and then, in a sentence with no mark before its
end, for the sentence (6.2 s after the first text, FLEURS en_fleurs_test_003).

The interpreter's pieces are MT commits, and a commit ends where a word ends
(`whole_word_pieces`): its first clause ends with the commit that completes `first_min_words`
words (in Chinese `first_min_chars` of speech) instead of waiting for the next commit, 0.8 s or
more later, to show that its last word is whole; a clause mark the next commit begins with
("，") is then dropped from the start of the next clause.

`speakable()` drops what a TTS voice would read out literally and a listener would
not expect: Markdown emphasis and headings, code fences, bullets. The voice agent
uses the speakable text as the assistant's transcript too, so the transcript is
exactly what was spoken.
"""

from __future__ import annotations

import itertools
import logging
import re
import unicodedata
from dataclasses import dataclass

_SENTENCE_END = frozenset(".!?…")
_CJK_SENTENCE_END = frozenset("。！？")
_CLAUSE_MARK = frozenset(",;:")
_CJK_CLAUSE_MARK = frozenset("，；：、")
_LEADING_MARKS = "".join(sorted(_CLAUSE_MARK | _CJK_CLAUSE_MARK))
#: Words whose trailing period does not end a sentence (lower case, without the period).
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "a.m", "p.m"}
    | {"no", "approx", "dept", "fig", "inc", "ltd", "co"}
)

#: Words a phrase opens with, by language: the first clause may end before one of them. Only
#: words that seldom start anything else: no articles ("die" and "a" open most noun phrases).
PHRASE_OPENERS: dict[str, frozenset[str]] = {
    "en": frozenset(
        {"and", "but", "or", "so", "because", "which", "that", "who", "when", "where", "if", "while"}
        | {"to", "of", "in", "on", "at", "for", "with", "from", "by", "about", "into", "than"}
        | {"is", "are", "was", "were", "will", "can", "has", "have"}
    ),
    "de": frozenset(
        {"und", "aber", "oder", "denn", "weil", "dass", "wenn", "als", "ob", "während", "sondern"}
        | {"zu", "von", "mit", "im", "auf", "am", "für", "aus", "bei", "nach", "über", "unter"}
        | {"durch", "gegen", "ohne", "vor", "seit", "ist", "sind", "war", "waren", "wird", "werden"}
        | {"hat", "haben", "kann", "können"}
    ),
    "it": frozenset(
        {"e", "ed", "ma", "o", "oppure", "perché", "che", "quando", "dove", "se", "mentre", "come"}
        | {"di", "da", "con", "su", "per", "tra", "fra", "del", "della", "dei", "delle", "al"}
        | {"alla", "nel", "nella", "dal", "dalla", "sul", "sulla", "è", "sono", "era", "erano"}
        | {"sarà", "ha", "hanno", "può"}
    ),
    # jieba's words (`chinese_tokens`).
    "zh": frozenset(
        {"和", "但", "但是", "而", "或", "或者", "因为", "所以", "如果", "虽然", "当", "并", "并且"}
        | {"在", "从", "对", "向", "到", "把", "被", "给", "跟", "与", "为", "比"}
        | {"是", "会", "能", "可以", "将", "已经"}
    ),
}
_WORD = re.compile(r"\S+")
#: A wide character's length: one syllable of Mandarin at about 5 a second, against about 15
#: Latin letters a second of English speech.
WIDE_CHAR_WEIGHT = 3


def chinese_tokens(text: str) -> list[tuple[int, int]]:
    """jieba's tokens of Chinese `text` (words, and the marks and spaces between), as spans. Its
    dictionary loads on the first call (about 1 s); the server's Kokoro voices load it at
    start-up (`engines/tts/kokoro.py`)."""
    import jieba  # on first use: only Chinese text needs it

    jieba.setLogLevel(logging.WARNING)  # not its "Building prefix dict" lines
    ends = list(itertools.accumulate(len(token) for token in jieba.cut(text)))
    return list(zip([0, *ends][: len(ends)], ends, strict=True))


def _mark_or_space(token: str) -> bool:
    return not any(unicodedata.category(char)[0] in "LN" for char in token)


def _starts_word(char: str) -> bool:
    """Whether `char` may begin the next clause: a letter, a digit or white space, not a mark."""
    return unicodedata.category(char)[0] in "LNZ"


def char_weight(char: str) -> int:
    """How much of a clause's length `char` is: `WIDE_CHAR_WEIGHT` for a wide (CJK) one."""
    return WIDE_CHAR_WEIGHT if unicodedata.east_asian_width(char) in "WF" else 1


def spoken_length(text: str) -> int:
    """`text`'s length as the cutter counts it (`char_weight`)."""
    return sum(map(char_weight, text))


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
    first_min_words: int = 3
    first_max_words: int = 6
    min_chars: int = 40
    max_chars: int = 160
    #: The language of the text (ISO 639-1): whose `PHRASE_OPENERS` the first clause may end before.
    language: str = "en"
    #: Each pushed piece ends where a word ends, as an MT commit does (it ends where the draft's
    #: next token opens a word, in Chinese where one of jieba's words ends): the first clause may
    #: end with the piece that completes its `first_min_words` words (Chinese: its
    #: `first_min_chars`), without waiting for the next piece to show the word is whole.
    whole_word_pieces: bool = False

    def __post_init__(self) -> None:
        self._pending = ""
        self._cut_any = False
        #: Where the pushed pieces end in the pending text: the first clause of text without
        #: spaces may end there.
        self._piece_ends: list[int] = []

    @classmethod
    def spoken_answer(cls) -> ClauseCutter:
        """The voice agent's cutter: the first clause ends after two to four words (see the
        module's docstring); later clauses as the defaults."""
        return cls(first_min_words=2, first_max_words=4)

    def push(self, piece: str) -> list[str]:
        """The clauses `piece` completes, in order (each with its trailing space trimmed)."""
        self._pending += piece
        if not self._cut_any:  # only the first clause may end at a piece's end
            self._piece_ends.append(len(self._pending))
        clauses: list[str] = []
        while (cut := self._find_cut()) is not None:
            clause, self._pending = self._pending[:cut], self._pending[cut:]
            clause = self._trimmed(clause)
            if clause:
                clauses.append(clause)
                self._cut_any = True
            self._piece_ends = [end - cut for end in self._piece_ends if end > cut and not self._cut_any]
        return clauses

    def cut_words(self) -> str:
        """With `whole_word_pieces`: all the text pushed so far as a clause, ending where the
        last piece ended, once it holds `first_min_words` words (Chinese: `first_min_chars` of
        speech); else "". For a voice that would otherwise fall silent before the next mark."""
        text = self._pending.strip()
        if not self.whole_word_pieces or not self._holds_a_first_clause(text):
            return ""
        self._pending, self._piece_ends, self._cut_any = "", [], True
        return self._trimmed(text)

    def finish(self) -> str:
        """What is left, as the last clause ("" when nothing is)."""
        rest, self._pending = self._trimmed(self._pending), ""
        self._piece_ends = []
        return rest

    def _holds_a_first_clause(self, text: str) -> bool:
        """Whether `text`, ending on a whole word, is as long as a first clause must be:
        `first_min_words` words, or in text without spaces `first_min_chars` of speech."""
        if not text:
            return False
        if self.language == "zh" or char_weight(text[-1]) == WIDE_CHAR_WEIGHT:
            return spoken_length(text) >= self.first_min_chars
        return len(text.split()) >= self.first_min_words

    def _trimmed(self, clause: str) -> str:
        """`clause` without white space around it; a cut at a piece's end (`whole_word_pieces`)
        may leave a clause mark at the start of the next clause ("，交流"), which is no word."""
        clause = clause.strip()
        return clause.lstrip(_LEADING_MARKS).lstrip() if self.whole_word_pieces else clause

    def _find_cut(self) -> int | None:
        """The end of the first complete clause in the pending text, or None."""
        text = self._pending
        least = self.min_chars if self._cut_any else self.first_min_chars
        length = 0  # of text[: i + 1]
        for i, char in enumerate(text):
            length += char_weight(char)
            if char in _CJK_SENTENCE_END or (char in _CJK_CLAUSE_MARK and length >= least):
                return i + 1
            if i + 1 >= len(text):
                if char in _SENTENCE_END and self._final_end(text, i):
                    return i + 1
                continue
            if not text[i + 1].isspace():
                continue  # a Latin mark ends a clause only before white space (3.5, e.g.x)
            if char in _SENTENCE_END and not self._abbreviation(text, i):
                return i + 1
            if char in _CLAUSE_MARK and length >= least:
                return i + 1
        if not self._cut_any and (cut := self._first_break(text)) is not None:
            return cut
        if length > self.max_chars:
            end = self._within(text, self.max_chars)
            space = text.rfind(" ", 0, end)
            return space + 1 if space > 0 else end
        return None

    @staticmethod
    def _within(text: str, limit: int) -> int:
        """The longest start of `text` (at least one character) whose length is at most `limit`."""
        length = 0
        for i, char in enumerate(text):
            length += char_weight(char)
            if length > limit:
                return max(i, 1)
        return len(text)

    def _first_break(self, text: str) -> int | None:
        """Where the first clause may end between words, before any mark: the end of its
        `first_max_words`-th word, or an earlier one that a phrase opener follows. In Chinese
        the words are jieba's (without the marks and spaces between them), found once here."""
        tokens = chinese_tokens(text) if self.language == "zh" else None
        if tokens is None:
            words = [match.span() for match in _WORD.finditer(text)]
        else:
            words = [(start, end) for start, end in tokens if not _mark_or_space(text[start:end])]
        openers = PHRASE_OPENERS.get(self.language, frozenset())
        # The last word may still be growing; a word counts once white space follows it.
        complete = words if text[-1:].isspace() else words[:-1]
        for n, (_, end) in enumerate(complete[: self.first_max_words], start=1):
            if not _starts_word(text[end]):
                continue  # a mark follows (Chinese words leave it out): it ends the clause
            if n == self.first_max_words:
                return end
            following = text[slice(*words[n])].lower() if n < len(words) else ""
            if n >= self.first_min_words and n < len(complete) and following in openers:
                return end
        at_piece_end = self._piece_ends[-1:] == [len(text)] and not text[-1:].isspace()
        if self.whole_word_pieces and at_piece_end and self._holds_a_first_clause(text):
            return len(text)
        return self._wide_break(text, None if tokens is None else {end for _, end in tokens})

    def _wide_break(self, text: str, word_ends: set[int] | None) -> int | None:
        """In text without spaces (Chinese, Japanese): the first end of a pushed piece after a
        wide character and before a word (not a mark, which ends the clause it follows), once
        the text before it is `first_min_chars` long and another piece has begun; where
        `word_ends` are known (Chinese), only at one of them (a piece may end inside a word:
        "近在" of "近在咫尺"). A Latin word after it ("根据| cabbage的") is a word too: the
        clause need not wait for the next mark."""
        for end in self._piece_ends:
            if end >= len(text):
                return None
            breaks = char_weight(text[end - 1]) == WIDE_CHAR_WEIGHT and _starts_word(text[end])
            at_word_end = word_ends is None or end in word_ends
            if breaks and at_word_end and spoken_length(text[:end]) >= self.first_min_chars:
                return end
        return None

    def _final_end(self, text: str, mark: int) -> bool:
        """A sentence end at the very end of the text that nothing to come can undo: not a
        period after a digit (3.|5), nor after another period (..|.), nor of an abbreviation."""
        if text[mark] != ".":
            return True
        before = text[mark - 1] if mark else ""
        return before.isalpha() and not self._abbreviation(text, mark)

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
