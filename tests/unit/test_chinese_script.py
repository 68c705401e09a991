"""Chinese transcripts written in the configured script (`engines.asr.chinese_script`)."""

from __future__ import annotations

import pytest

from dragoman.config import ASRSettings
from dragoman.engines.asr.chinese_script import write

HEARD = "該項目於2011年8月完工，但直到2017年3月才開始通車。"
SIMPLIFIED = "该项目于2011年8月完工，但直到2017年3月才开始通车。"


def test_traditional_characters_are_written_simplified() -> None:
    assert write(HEARD, "zh", "simplified") == SIMPLIFIED


def test_simplified_characters_are_written_traditional() -> None:
    assert write(SIMPLIFIED, "zh", "traditional") == HEARD


@pytest.mark.parametrize("text", [HEARD, SIMPLIFIED, "乾燥的頭髮後來", "头发后来干燥", "OpenAI 的 API 2026"])
@pytest.mark.parametrize("script", ["simplified", "traditional"])
def test_a_written_text_keeps_its_length_and_is_written_once(text: str, script: str) -> None:
    # Word offsets into the text (`StepResult.words`) stay valid, and a text already in the
    # script (a forced prefix, a previous-text prompt) comes back as it is.
    once = write(text, "zh", script)  # type: ignore[arg-type]
    assert len(once) == len(text)
    assert write(once, "zh", script) == once  # type: ignore[arg-type]


def test_heard_leaves_the_text_as_the_model_wrote_it() -> None:
    assert write(HEARD, "zh", "heard") == HEARD


@pytest.mark.parametrize("language", ["ja", "en", None])
def test_other_languages_are_left_alone(language: str | None) -> None:
    # Japanese kanji include forms OpenCC would simplify: they are not Chinese text.
    assert write("國際會議に參加", language, "simplified") == "國際會議に參加"


def test_simplified_is_the_default() -> None:
    assert ASRSettings().chinese_script == "simplified"
