"""Kokoro's text front end: sentences, phonemes per language, token ids, chunks that fit the model.

Kokoro-82M reads phonemes, one token per symbol of its vocabulary (`vocab.json`). Its own
pipeline makes them with misaki: espeak-ng's IPA for Italian, rewritten into Kokoro's
symbols (affricates as one letter, "d^ʒ" -> "ʤ"), and misaki's pinyin-to-IPA for
Mandarin, tones written as arrows. This module does the same, keeping the punctuation,
which Kokoro reads as pauses and intonation, and splitting the text so that the first
sentence is spoken before the next one is phonemised.

A voice's style pack holds one 256-wide style per input length, 510 rows: a chunk takes the
row of its token count, so a chunk holds at most 509 tokens (the model adds one pad token
at either end).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from dragoman.engines.tts import espeak
from dragoman.errors import ModelUnavailable

#: The most tokens one model call takes: row `len(tokens)` of a 510-row style pack.
MAX_TOKENS = 509

#: A phonemiser: the text of one sentence -> Kokoro phonemes.
G2P = Callable[[str], str]

#: Kokoro's voice prefixes: i = Italian, z = Mandarin (f/m: female/male).
STYLE_LANGUAGES = {"i": "it", "z": "zh"}
#: Languages Kokoro has no voice of, spoken by voices of another: German by the Italian ones,
#: reading espeak-ng's German IPA with an Italian accent. Heard back by Whisper base on 12 FLORES
#: lines at WER 39.0 % (nicola) and 39.4 % (sara) against 60.1 % for espeak-ng's German
#: (2026-12-07, bench/tts_roundtrip.py). Such a voice is named "<style>.<language>" ("im_nicola.de").
BORROWED_STYLES: dict[str, tuple[str, ...]] = {"de": ("im_nicola", "if_sara")}


def voice_style(voice: str) -> str:
    """The style pack a Kokoro voice speaks with: "im_nicola.de" -> "im_nicola"."""
    return voice.split(".", 1)[0]


def voice_language(voice: str) -> str:
    """The language a Kokoro voice speaks: "if_sara" -> "it", "zm_yunxi" -> "zh", "im_nicola.de" -> "de"."""
    style, _, language = voice.partition(".")
    return language or STYLE_LANGUAGES[style[0]]


def kokoro_voices(styles: Sequence[str]) -> tuple[str, ...]:
    """The voices of these style packs: each in its own language, then the borrowed ones."""
    borrowed = (
        f"{s}.{language}" for language, names in BORROWED_STYLES.items() for s in names if s in styles
    )
    return (*styles, *borrowed)


#: Sentence ends: Western ones before a space (not the dot of "3.5"), CJK ones anywhere.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])")
#: Punctuation Kokoro reads: Western marks before a space or the end (a decimal point is not one),
#: quotes, brackets and dashes anywhere.
_MARKS = re.compile(r"([.,;:!?…]+(?=\s|$)|[—\"“”«»()¡¿]+)")
_OPENING = frozenset("“(¡¿")
_AFTER_OPENING = re.compile(r"([“(¡¿]) ")
#: espeak-ng's language switches ("(en)hello(it)") are dropped: Kokoro speaks one language.
_LANGUAGE_FLAG = re.compile(r"\([a-z]{2,3}(?:-[a-z0-9]+)?\)")

#: espeak-ng's tied IPA -> Kokoro's single symbols (misaki's EspeakG2P table).
_ESPEAK_TO_KOKORO = sorted(
    {
        "a^ɪ": "I",
        "a^ʊ": "W",
        "d^z": "ʣ",
        "d^ʒ": "ʤ",
        "e^ɪ": "A",
        "o^ʊ": "O",
        "ə^ʊ": "Q",
        "s^s": "S",
        "t^s": "ʦ",
        "t^ʃ": "ʧ",
        "ɔ^ɪ": "Y",
    }.items(),
    key=lambda pair: -len(pair[0]),
)


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence end; blank pieces dropped."""
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


def _with_marks(text: str, words_to_ipa: Callable[[str], str]) -> str:
    """Phonemise the words between punctuation marks and keep the marks where they stood."""
    out: list[str] = []
    for piece in _MARKS.split(text):
        if not piece.strip():
            continue
        if _MARKS.fullmatch(piece):
            mark = piece.replace("«", "“").replace("»", "”")
            # An opening mark stands before the next word, a closing one right after the last.
            out.append(" " + mark if mark[0] in _OPENING else mark)
        else:
            out.append(" " + words_to_ipa(piece.strip()))
    joined = re.sub(r"\s+", " ", "".join(out)).strip()
    return _AFTER_OPENING.sub(r"\1", joined)


def espeak_ipa_to_kokoro(ipa: str) -> str:
    """espeak-ng's tied IPA -> Kokoro's symbols; the ties and hyphens that remain are dropped."""
    ipa = _LANGUAGE_FLAG.sub("", ipa)
    for old, new in _ESPEAK_TO_KOKORO:
        ipa = ipa.replace(old, new)
    return ipa.replace("^", "").replace("-", "")


def espeak_g2p(voice: str) -> G2P:
    """A phonemiser on espeak-ng's IPA in `voice` ("it"), as misaki's EspeakG2P."""

    def g2p(text: str) -> str:
        return _with_marks(text, lambda words: espeak_ipa_to_kokoro(espeak.ipa(words, voice)))

    return g2p


#: A run of Latin letters in Chinese text, with the spaces, apostrophes and hyphens inside it.
_LATIN_RUN = re.compile(r"[A-Za-z](?:[A-Za-z '\-]*[A-Za-z])?")
#: The espeak-ng voice that phonemises them.
ENGLISH_VOICE = "en-us"


class MandarinG2P:
    """misaki's ZHG2P in its Kokoro v1.0 form: jieba words -> pinyin -> IPA with tone arrows,
    and the Latin names and acronyms a Chinese translation keeps (QVC, ZMapp, Shark Tank) in
    espeak-ng's English IPA. ZHG2P v1.0 passes Latin letters through as they are, and the few
    Kokoro's vocabulary has were read as phonemes ("QVC" as a "v"); Kokoro's own pipeline gives
    ZHG2P an English phonemiser for them in the same way (`en_callable`).

    Imported on first use (jieba builds its dictionary then, about 2 s); thread-safe.
    """

    def __init__(self) -> None:
        self._g2p: Callable[[str], tuple[str, object]] | None = None
        self._lock = threading.Lock()

    def _load(self) -> Callable[[str], tuple[str, object]]:
        with self._lock:
            if self._g2p is None:
                try:
                    import jieba
                    from misaki.zh import ZHG2P
                except ImportError as exc:
                    raise ModelUnavailable(
                        "the Mandarin Kokoro voices need misaki[zh] (`pip install 'misaki[zh]==0.9.4'`, "
                        f"part of `make install`): {exc}"
                    ) from exc
                jieba.setLogLevel(logging.WARNING)
                g2p = ZHG2P()
                g2p("你好。")  # builds jieba's dictionary here, under the lock
                self._g2p = g2p
            return self._g2p

    def __call__(self, text: str) -> str:
        g2p = self._load()
        pieces: list[str] = []
        at = 0
        for latin in _LATIN_RUN.finditer(text):
            pieces.append(g2p(text[at : latin.start()])[0])
            pieces.append(espeak_ipa_to_kokoro(espeak.ipa(latin.group(), ENGLISH_VOICE)))
            at = latin.end()
        pieces.append(g2p(text[at:])[0])
        return " ".join(piece.strip() for piece in pieces if piece.strip())


def g2p_for(language: str) -> G2P:
    """The phonemiser of an ISO 639-1 language Kokoro speaks here (it, zh, de)."""
    if language in ("it", "de"):
        return espeak_g2p(language)
    if language == "zh":
        return MandarinG2P()
    raise ValueError(f"no Kokoro phonemiser for {language!r}")


class Vocabulary:
    """Kokoro's phoneme symbols -> token ids; symbols outside it are dropped, as Kokoro's pipeline does."""

    def __init__(self, ids: Mapping[str, int]) -> None:
        if not ids or any(len(symbol) != 1 for symbol in ids):
            raise ValueError("a Kokoro vocabulary maps single symbols to ids")
        self.ids = dict(ids)
        self.punctuation = frozenset(self.ids[s] for s in ';:,.!?—…"“”' if s in self.ids)
        self.space = self.ids.get(" ")

    @classmethod
    def from_file(cls, path: Path) -> Vocabulary:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls({str(k): int(v) for k, v in data["vocab"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelUnavailable(f"cannot read Kokoro's vocabulary {path}: {exc}") from exc

    def encode(self, phonemes: str) -> list[int]:
        return [self.ids[s] for s in phonemes if s in self.ids]

    def chunks(self, tokens: Sequence[int], limit: int = MAX_TOKENS) -> Iterator[list[int]]:
        """`tokens` in pieces of at most `limit`, cut after the last punctuation that fits,
        else at the last space, else at the limit; no piece starts or ends with a space."""
        start = 0
        while start < len(tokens):
            while start < len(tokens) and tokens[start] == self.space:
                start += 1
            end = min(start + limit, len(tokens))
            if end < len(tokens):
                end = self._cut(tokens, start, end)
            piece = list(tokens[start:end])
            while piece and piece[-1] == self.space:
                piece.pop()
            if piece:
                yield piece
            start = end

    def _cut(self, tokens: Sequence[int], start: int, end: int) -> int:
        for wanted in (self.punctuation, {self.space}):
            for i in range(end - 1, start, -1):
                if tokens[i] in wanted:
                    return i + 1
        return end
