"""The voice catalog: local and OpenAI names, unknown voices, language fallback; no model loaded."""

from __future__ import annotations

import pytest

from dragoman.config import TTSSettings
from dragoman.engines.registry import tts_backends
from dragoman.engines.tts.voices import (
    BACKENDS,
    DEFAULT_VOICE,
    ESPEAK,
    LANGUAGE_PARAM,
    OPENAI_VOICES,
    VOICE_PARAM,
    VoiceCatalog,
    normalize_language,
    voice_for,
)
from dragoman.errors import ConfigError, InvalidValue

OPENAI = ("alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar")


def test_local_voices_map_to_their_backends() -> None:
    assert voice_for("hibari").backend == "hibari"
    assert voice_for("hibari").backend_voice == "heart"
    assert voice_for("joe").backend == "piper"
    assert voice_for("joe").backend_voice == "en_US-joe-medium"
    de = voice_for("espeak-de")
    assert (de.backend, de.backend_voice, de.language) == (ESPEAK, "de", "de")
    zh = voice_for("espeak-zh")
    assert (zh.backend_voice, zh.language) == ("cmn", "zh")
    assert voice_for("espeak-it").language == "it"


@pytest.mark.parametrize("name", OPENAI)
def test_every_openai_voice_gets_a_neural_english_voice(name: str) -> None:
    voice = voice_for(name)
    assert voice.language == "en" and voice.neural
    assert voice.name in ("hibari", "joe")


def test_openai_voices_are_all_mapped() -> None:
    assert set(OPENAI_VOICES) == set(OPENAI)
    # Both English voices are used, so OpenAI clients that switch voices hear a difference.
    assert {voice_for(name).name for name in OPENAI} == {"hibari", "joe"}


def test_no_name_is_the_default_voice() -> None:
    assert voice_for(None).name == DEFAULT_VOICE == TTSSettings().voice
    assert voice_for("").name == DEFAULT_VOICE
    assert VoiceCatalog(default="joe").voice_for(None).name == "joe"
    assert VoiceCatalog(default="ash").voice_for(None).name == "joe"


def test_unknown_voice_is_a_client_error_listing_the_names() -> None:
    with pytest.raises(InvalidValue) as info:
        voice_for("nova-pro")
    assert info.value.param == VOICE_PARAM == "session.audio.output.voice"
    assert "'nova-pro'" in info.value.message
    for name in ("hibari", "joe", "kokoro-it-sara", "kokoro-zh-xiaobei", "alloy", "cedar"):
        assert name in info.value.message
    # espeak-ng's voices are one entry, with the languages they are named for.
    assert "espeak-<language> (en, de, it, zh," in info.value.message
    assert len(info.value.message) <= 500


def test_a_huge_unknown_name_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidValue) as info:
        voice_for("x" * 10_000)
    assert len(info.value.message) <= 500


@pytest.mark.parametrize(("language", "backend_voice"), [("de", "de"), ("it", "it"), ("zh", "cmn")])
def test_language_without_a_neural_voice_falls_back_to_espeak(language: str, backend_voice: str) -> None:
    for name in (None, "hibari", "joe", "alloy", "espeak-en"):
        voice = voice_for(name, language)
        assert (voice.backend, voice.backend_voice, voice.language) == (ESPEAK, backend_voice, language)


def test_language_the_voice_speaks_keeps_it() -> None:
    assert voice_for("joe", "en").name == "joe"
    assert voice_for("ash", "en-US").name == "joe"
    assert voice_for("espeak-en", "en").name == "espeak-en"
    assert voice_for("espeak-de", "de-DE").name == "espeak-de"


def test_english_asked_of_an_espeak_voice_gets_the_neural_default() -> None:
    assert voice_for("espeak-de", "en").name == DEFAULT_VOICE


def test_language_spellings() -> None:
    assert normalize_language("en-US") == "en"
    assert normalize_language("zh-Hans") == "zh"
    assert normalize_language("cmn") == "zh"
    assert normalize_language("pt_BR") == "pt"
    assert normalize_language(None) is None
    assert normalize_language("") is None
    assert voice_for("hibari", "zh-CN").backend_voice == "cmn"


def test_unknown_language_is_a_client_error() -> None:
    with pytest.raises(InvalidValue) as info:
        voice_for("hibari", "tlh")
    assert info.value.param == LANGUAGE_PARAM


def test_catalog_of_some_backends() -> None:
    only_espeak = VoiceCatalog([ESPEAK], default="espeak-en")
    assert only_espeak.backends == (ESPEAK,)
    # With no neural voice loaded, OpenAI's names still speak, with espeak-ng's English.
    assert only_espeak.voice_for("alloy").name == "espeak-en"
    with pytest.raises(InvalidValue):
        only_espeak.voice_for("hibari")
    no_piper = VoiceCatalog(["hibari", ESPEAK])
    assert no_piper.backends == ("hibari", ESPEAK)
    assert no_piper.voice_for("cedar").name == "hibari"
    assert "joe" not in no_piper.names


def test_catalog_refuses_bad_settings() -> None:
    with pytest.raises(ConfigError, match="unknown TTS backends"):
        VoiceCatalog(["festival"])
    with pytest.raises(ConfigError, match="no TTS backend"):
        VoiceCatalog([])
    with pytest.raises(ConfigError, match="default TTS voice 'joe'"):
        VoiceCatalog(["hibari"], default="joe")


def test_catalog_backends_are_the_registry_ones() -> None:
    assert sorted(BACKENDS) == tts_backends()
    assert VoiceCatalog(TTSSettings().backends).backends == BACKENDS
