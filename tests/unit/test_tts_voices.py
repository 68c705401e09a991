"""The voice catalog: local and OpenAI names, unknown voices, language fallback; no model loaded."""

from __future__ import annotations

import typing
from typing import Literal

import pytest
from openai.types.audio.speech_create_params import SpeechCreateParams

from dragoman.config import InterpreterSettings, TTSSettings
from dragoman.engines.registry import tts_backends
from dragoman.engines.tts.voices import (
    BACKENDS,
    BEST_VOICES,
    DEFAULT_VOICE,
    ESPEAK,
    KOKORO,
    KOKORO_NAMES,
    LANGUAGE_PARAM,
    LOCAL_VOICES,
    OPENAI_VOICES,
    REMOTE,
    VOICE_PARAM,
    Voice,
    VoiceCatalog,
    normalize_language,
    voice_for,
    voice_for_language,
)
from dragoman.errors import ConfigError, InvalidValue


def _openai_voice_names() -> tuple[str, ...]:
    """The voice names the openai SDK's /v1/audio/speech request declares (a superset of the
    Realtime API's): OpenAI's list, not ours."""
    voice = typing.get_type_hints(SpeechCreateParams, include_extras=True)["voice"]
    literals = [
        arg for arg in typing.get_args(typing.get_args(voice)[0]) if typing.get_origin(arg) is Literal
    ]
    return tuple(name for literal in literals for name in typing.get_args(literal))


OPENAI = _openai_voice_names()


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
    assert len(OPENAI) >= 13  # the SDK's list was read: alloy ... cedar, fable, nova, onyx
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
    for name in ("hibari", "joe", "alloy", "cedar"):
        assert name in info.value.message
    # Kokoro's voices are one entry, by language.
    assert "kokoro-<language>-<name> (it: sara, nicola; zh: xiaobei," in info.value.message
    assert "de: nicola, sara)" in info.value.message
    # espeak-ng's voices are one entry, with the languages they are named for.
    assert "espeak-<language> (en, de, it, zh," in info.value.message
    assert len(info.value.message) <= 500


def test_a_huge_unknown_name_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidValue) as info:
        voice_for("x" * 10_000)
    assert len(info.value.message) <= 500


@pytest.mark.parametrize("name", ["af_bella", "bm_george", "my-cloned-voice", "af_bella(2)+af_sky(1)"])
def test_a_remote_server_s_own_voice_is_passed_on_as_given(name: str) -> None:
    remote = VoiceCatalog(remote=True)
    assert remote.voice_for(name) == Voice(name, REMOTE, name, "en")
    # The language asked for stays with the remote voice: the catalog cannot know it is wrong.
    assert remote.voice_for(name, "it-IT") == Voice(name, REMOTE, name, "it")
    with pytest.raises(InvalidValue):
        VoiceCatalog().voice_for(name)  # no remote server: not a voice here


def test_a_remote_catalog_keeps_its_own_names_and_refuses_what_it_cannot_pass_on() -> None:
    remote = VoiceCatalog(remote=True)
    assert remote.voice_for("alloy") == remote.voice_for("hibari") == LOCAL_VOICES[0]
    assert remote.voice_for(None) == LOCAL_VOICES[0]
    for name in ("x" * 65, "bad\nname"):
        with pytest.raises(InvalidValue) as info:
            remote.voice_for(name)
        assert info.value.param == VOICE_PARAM
    assert remote.backends == VoiceCatalog().backends, "nothing remote-only is loaded"


def test_german_is_read_by_kokoros_italian_voice_else_espeak() -> None:
    for name in (None, "hibari", "joe", "alloy", "espeak-en"):
        voice = voice_for(name, "de")
        assert (voice.backend, voice.backend_voice, voice.language) == (KOKORO, "im_nicola.de", "de")
    without = VoiceCatalog([b for b in BACKENDS if b != KOKORO])
    voice = without.for_language("de")
    assert (voice.backend, voice.backend_voice, voice.language) == (ESPEAK, "de", "de")


@pytest.mark.parametrize("language", ["it", "zh", "de"])
def test_a_language_gets_its_best_measured_voice(language: str) -> None:
    best = BEST_VOICES[language][0]
    for name in (None, "hibari", "joe", "alloy", "espeak-en"):
        assert voice_for(name, language).name == best
    assert voice_for_language(language).name == best
    # Without the backend of the best voice, the next one loaded.
    without = VoiceCatalog([b for b in BACKENDS if b != voice_for(best).backend])
    assert without.for_language(language).name == next(
        n for n in BEST_VOICES[language] if voice_for(n).backend != voice_for(best).backend
    )


def test_best_voices_are_voices_of_their_language() -> None:
    names = {v.name: v for v in LOCAL_VOICES}
    for language, ranked in BEST_VOICES.items():
        assert ranked and len(set(ranked)) == len(ranked)
        assert all(names[n].language == language for n in ranked)
    assert voice_for_language("en").name == "hibari"
    assert voice_for_language("de").name == "kokoro-de-nicola"


def test_kokoro_voices() -> None:
    assert voice_for("kokoro-it-sara") == Voice("kokoro-it-sara", KOKORO, "if_sara", "it")
    assert voice_for("kokoro-it-nicola").backend_voice == "im_nicola"
    assert voice_for("kokoro-zh-yunxi") == Voice("kokoro-zh-yunxi", KOKORO, "zm_yunxi", "zh")
    assert voice_for("kokoro-de-sara") == Voice("kokoro-de-sara", KOKORO, "if_sara.de", "de")
    assert len(KOKORO_NAMES) == 12 and all(v.neural for n in KOKORO_NAMES for v in [voice_for(n)])
    # A Kokoro voice asked for another language hands over to that language's best voice.
    assert voice_for("kokoro-it-sara", "en").name == DEFAULT_VOICE


def test_a_voice_chosen_for_a_language_wins_where_it_is_loaded() -> None:
    catalog = VoiceCatalog()
    chosen = {"de": "espeak-de", "zh": "kokoro-zh-xiaobei"}
    assert catalog.for_language("de", chosen).name == "espeak-de"
    assert catalog.for_language("de-AT", chosen).name == "espeak-de"
    assert catalog.for_language("zh-CN", chosen).name == "kokoro-zh-xiaobei"
    assert catalog.for_language("it", chosen).name == BEST_VOICES["it"][0]  # none chosen
    # A chosen voice whose backend is not loaded is passed over for the best loaded one.
    without = VoiceCatalog([b for b in BACKENDS if b != ESPEAK])
    assert without.for_language("de", chosen).name == "kokoro-de-nicola"
    # A remote server is given the name as chosen.
    remote = VoiceCatalog(remote=True).for_language("de", {"de": "their-german"})
    assert (remote.name, remote.backend, remote.language) == ("their-german", REMOTE, "de")


def test_a_chosen_voice_that_is_none_or_of_another_language_is_a_configuration_error() -> None:
    catalog = VoiceCatalog()
    catalog.check_chosen({"de": "kokoro-de-sara", "it": "espeak-it"}, "interpreter.voices")
    without_espeak = VoiceCatalog([b for b in BACKENDS if b != ESPEAK])
    without_espeak.check_chosen({"de": "espeak-de"}, "interpreter.voices")  # known, not loaded
    with pytest.raises(ConfigError, match=r"interpreter\.voices: 'kokoro-de-hans' is no voice; known"):
        catalog.check_chosen({"de": "kokoro-de-hans"}, "interpreter.voices")
    with pytest.raises(ConfigError, match=r"interpreter\.voices: 'hibari' speaks 'en', not 'de'"):
        catalog.check_chosen({"de": "hibari"}, "interpreter.voices")
    VoiceCatalog(remote=True).check_chosen({"de": "their-german"}, "interpreter.voices")


def test_the_interpreter_speaks_german_with_espeak_unless_told_otherwise() -> None:
    """Issue 25's German voice, which keeps two sessions' text within the lag bound."""
    assert InterpreterSettings().voices == {"de": "espeak-de"}
    assert InterpreterSettings(voices="").voices == {}  # type: ignore[arg-type]
    named = InterpreterSettings(voices="DE=kokoro-de-nicola, zh=kokoro-zh-yunjian")  # type: ignore[arg-type]
    assert named.voices == {"de": "kokoro-de-nicola", "zh": "kokoro-zh-yunjian"}
    with pytest.raises(ValueError, match="an interpreter voice is LANGUAGE=VOICE, not 'kokoro-de-sara'"):
        InterpreterSettings(voices="kokoro-de-sara")  # type: ignore[arg-type]


def test_for_language_spellings_and_unknown_languages() -> None:
    catalog = VoiceCatalog()
    assert catalog.for_language("zh-CN") == catalog.for_language("cmn") == catalog.for_language("zh")
    assert catalog.for_language("it-IT") == catalog.for_language("it")
    with pytest.raises(InvalidValue) as info:
        catalog.for_language("tlh")
    assert info.value.param == LANGUAGE_PARAM
    assert "de, el, en" in info.value.message
    only_espeak = VoiceCatalog([ESPEAK], default="espeak-en")
    assert only_espeak.for_language("it").name == "espeak-it"
    assert only_espeak.for_language("en").name == "espeak-en"


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
    assert voice_for("hibari", "zh-CN").language == "zh"


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
