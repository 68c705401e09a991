"""`asr.routes`: English steps to Moonshine base, the rest to Whisper base, in one engine, on real
speech from ../shared/eval."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.config import ASRSettings
from dragoman.engines.asr.base import StepRequest
from dragoman.engines.asr.by_language import LanguageRoutedASR
from dragoman.engines.asr.moonshine_ort import MoonshineEngine
from dragoman.engines.asr.whisper_ct2 import WhisperCT2Engine
from dragoman.engines.registry import create_asr_engine
from dragoman.tools.wer import wer
from tests.engine.test_whisper_ct2 import DE, EN, REFS, audio, ok

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def routed(cache_dir: Path) -> LanguageRoutedASR:
    engine = create_asr_engine(
        ASRSettings.model_validate({"routes": ["en=moonshine"], "threads": 2}), cache_dir
    )
    assert isinstance(engine, LanguageRoutedASR)
    return engine


def test_the_route_builds_moonshine_beside_the_default_whisper(routed: LanguageRoutedASR) -> None:
    assert isinstance(routed.default, WhisperCT2Engine) and routed.default.name == "whisper-base"
    moonshine = routed.routes["en"]
    assert isinstance(moonshine, MoonshineEngine) and moonshine.name == "moonshine-base-en"
    assert routed.name == "whisper-base", "clients see the default's name"
    assert "en: moonshine-base-en" in routed.describe().backend


def test_english_goes_to_moonshine_and_german_and_open_language_to_whisper(routed: LanguageRoutedASR) -> None:
    moonshine = routed.routes["en"]
    assert isinstance(moonshine, MoonshineEngine)
    passes = moonshine.decoder_passes
    english = [StepRequest(audio(name), language="en") for name in EN]
    german, unknown = StepRequest(audio(DE), language="de"), StepRequest(audio(EN[2]))
    results = [ok(r) for r in routed.transcribe_batch([*english, german, unknown])]
    assert moonshine.decoder_passes > passes, "the English steps were Moonshine's"
    score = wer([REFS[name] for name in EN], [r.text for r in results[: len(EN)]])
    assert score < 0.12, score  # Moonshine base-en about 0.02 on these four, Whisper base 0.05
    assert results[len(EN)].language == "de" and wer([REFS[DE]], [results[len(EN)].text]) < 0.5
    # A step whose language is open is Whisper's, which detects it.
    assert results[-1].language == "en" and wer([REFS[EN[2]]], [results[-1].text]) < 0.3


def test_the_interpreters_route_takes_its_steps_only(cache_dir: Path) -> None:
    """`interpreter.asr_routes` (the default `en=moonshine`): the interpreter's English steps
    are Moonshine's, a transcription session's English stays Whisper's."""
    engine = create_asr_engine(ASRSettings(threads=2), cache_dir, {"interpreter": {"en": "moonshine"}})
    assert isinstance(engine, LanguageRoutedASR) and not engine.routes
    moonshine = engine.scoped["interpreter"]["en"]
    assert isinstance(moonshine, MoonshineEngine)
    clip = audio(EN[0])
    passes = moonshine.decoder_passes
    [plain] = engine.transcribe_batch([StepRequest(clip, language="en")])
    assert moonshine.decoder_passes == passes, "a transcription session's step stays Whisper's"
    [interpreted] = engine.transcribe_batch([StepRequest(clip, language="en", scope="interpreter")])
    assert moonshine.decoder_passes > passes
    for result in (plain, interpreted):
        assert wer([REFS[EN[0]]], [ok(result).text]) < 0.15, ok(result).text
    engine.close()
