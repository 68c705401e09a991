"""Is a translation draft a copy of its English source? A cheap check on its first words.

Small models sometimes "translate" a sentence by repeating it (Qwen2.5-Coder-0.5B
leaves whole FLORES sentences in English). Committed text is append-only, so the
check runs on the first words an utterance would commit, before they go out:

- targets written in another script (zh, ja, ko, ...): the text has Latin words and
  not one character of the target's script;
- targets written in Latin script (de, it, ...): most of its words are words of the
  source, and at least one is an English function word that is no word of the
  target language ("the", "of", "and", ...). Names and numbers, which a translation
  keeps, are words of the source but no function words, so "Dr. Ehud Ur, Professor
  für Medizin" is no copy, and "Dr. Ehud Ur, professor of medicine" is one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from dragoman.languages import primary_subtag

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
#: Words a draft's opening needs before a copy of the source is told from a translation.
DECIDING_WORDS = 3

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

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _in_script(char: str, scripts: Sequence[str]) -> bool:
    name = unicodedata.name(char, "")
    return any(name.startswith(script) for script in scripts)


def copies_source(source_words: Sequence[str], target_text: str, target_lang: str) -> bool:
    """Whether `target_text` (the first words of a draft) repeats the English source."""
    lang = primary_subtag(target_lang)
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


def copy_decidable(target_text: str, target_lang: str) -> bool:
    """Whether `copies_source` can tell yet: the text has a letter of the target's own script
    (no copy, then), or `DECIDING_WORDS` words; on fewer, one name or English word decides
    the share of source words alone."""
    scripts = _SCRIPTS.get(primary_subtag(target_lang))
    if scripts is not None and any(c.isalpha() and _in_script(c, scripts) for c in target_text):
        return True
    return len(_words(target_text)) >= DECIDING_WORDS


def _has_function_word(words: Iterable[str]) -> bool:
    return any(w in ENGLISH_FUNCTION_WORDS for w in words)
