"""Is a translation draft a copy of its English source? Cheap checks on its words.

Small models sometimes "translate" a sentence by repeating it (Qwen2.5-Coder-0.5B
leaves whole FLORES sentences in English). Committed text is append-only, so the
checks run on what an utterance would commit, before it goes out. On its first words:

- targets written in another script (zh, ja, ko, ...): the text has Latin words and
  not one character of the target's script;
- targets written in Latin script (de, it, ...): most of its words are words of the
  source, and at least one is an English function word that is no word of the
  target language ("the", "of", "and", ...). Names and numbers, which a translation
  keeps, are words of the source but no function words, so "Dr. Ehud Ur, Professor
  für Medizin" is no copy, and "Dr. Ehud Ur, professor of medicine" is one.

Later in an utterance a model may go on in English instead: the 1.5B, held to a committed
"Tuttavia, a causa della" (feminine, where its own translation had "dei canali"), finishes
the sentence with " slow communication channels," and, forced to Italian, with
" comunicazione troppo lenta,". So a draft that repeats a stretch of the source
(`repeats_source_stretch`: `MIN_STRETCH` source words in a row, `MIN_STRETCH_COMMON` of
them written lower-case there) is a copy anywhere. A name ("Lord Byron", "New York
Times") is capitalised and a number is no word, so a translation keeps those.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

#: English function words that are no words of German or Italian: "in", "an", "was",
#: "will", "also", "come", "a" and the like are left out, since a translation has them too.
_FUNCTION_WORDS = (
    "the of and to is are were that this these those with for from by at on or not but "
    "be been being has have had it its they them their he his she her we our you your "
    "which who whom whose what when where why how than then there here would could "
    "should can about after before into over under through between because while"
)
ENGLISH_FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())

#: Share of the draft's words that must be words of the source for a copy.
MIN_SOURCE_SHARE = 0.6

#: Targets not written in Latin script, by the Unicode script names of their letters.
_SCRIPTS = {
    "zh": ("CJK",),
    "ja": ("CJK", "HIRAGANA", "KATAKANA"),
    "ko": ("HANGUL", "CJK"),
    "ru": ("CYRILLIC",),
    "uk": ("CYRILLIC",),
    "ar": ("ARABIC",),
    "hi": ("DEVANAGARI",),
    "th": ("THAI",),
}

#: A stretch of the source repeated this many words long is a copy, when at least
#: `MIN_STRETCH_COMMON` of them are lower-case words (not names, not numbers).
MIN_STRETCH = 3
MIN_STRETCH_COMMON = 2

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
#: Words and numbers, for lining a draft up with its source.
_TOKEN = re.compile(r"\w+(?:['’]\w+)*")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _in_script(char: str, scripts: Sequence[str]) -> bool:
    name = unicodedata.name(char, "")
    return any(name.startswith(script) for script in scripts)


def copies_source(source_words: Sequence[str], target_text: str, target_lang: str) -> bool:
    """Whether `target_text` (the first words of a draft) repeats the English source."""
    lang = target_lang.split("-")[0].lower()
    words = _words(target_text)
    if not words:
        return False
    scripts = _SCRIPTS.get(lang)
    if scripts is not None:
        letters = [c for c in target_text if c.isalpha()]
        native = sum(1 for c in letters if _in_script(c, scripts))
        latin_words = [w for w in words if all(_in_script(c, ("LATIN",)) for c in w)]
        return native == 0 and len(latin_words) >= 2 and _has_function_word(latin_words)
    source = {w for word in source_words for w in _words(word)}
    shared = sum(1 for w in words if w in source)
    return shared / len(words) >= MIN_SOURCE_SHARE and _has_function_word(w for w in words if w in source)


def _has_function_word(words: Iterable[str]) -> bool:
    return any(w in ENGLISH_FUNCTION_WORDS for w in words)


def repeats_source_stretch(source_words: Sequence[str], target_text: str) -> bool:
    """Whether `target_text` repeats `MIN_STRETCH` source words in a row (case aside), at least
    `MIN_STRETCH_COMMON` of them lower-case words in the source."""
    source = [t for word in source_words for t in _TOKEN.findall(word)]
    folded = [t.lower() for t in source]
    common = [t.isalpha() and t.islower() for t in source]
    target = [t.lower() for t in _TOKEN.findall(target_text)]
    for i in range(len(target) - MIN_STRETCH + 1):
        for j, word in enumerate(folded):
            if word != target[i]:
                continue
            n = 0
            while i + n < len(target) and j + n < len(folded) and target[i + n] == folded[j + n]:
                n += 1
            if n >= MIN_STRETCH and sum(common[j : j + n]) >= MIN_STRETCH_COMMON:
                return True
    return False
