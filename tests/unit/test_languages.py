"""Language codes reduced to their primary subtag, the key every engine and policy uses."""

from __future__ import annotations

import pytest

from dragoman.languages import is_unsegmented, primary_subtag, word_joiner


@pytest.mark.parametrize(
    ("code", "primary"),
    [("en", "en"), ("en-US", "en"), ("DE", "de"), (" it ", "it"), ("zh_Hans", "zh"), ("zh-Hant-TW", "zh")],
)
def test_primary_subtag(code: str, primary: str) -> None:
    assert primary_subtag(code) == primary


@pytest.mark.parametrize(
    ("code", "unsegmented"), [("zh-CN", True), ("ja", True), ("en-GB", False), ("de", False)]
)
def test_unsegmented_languages(code: str, unsegmented: bool) -> None:
    assert is_unsegmented(code) is unsegmented


@pytest.mark.parametrize(
    ("before", "after", "between"),
    [
        ("", "x", ""),
        ("Hello there.", "General", " "),
        ("Hello there. ", "General", ""),
        ("Hello", " there", ""),
        ("这是一座桥。", "桥下", ""),
        ("bridge", "桥下", ""),
        ("桥下", "bridge", ""),
        ("こんにちは", "世界", ""),
        ("สวัสดี", "ครับ", ""),
        ("終わり，", "next", ""),
        ("안녕하세요", "세계", " "),  # Korean spaces its words
        ("Grüß", "Gott", " "),
    ],
)
def test_word_joiner_spaces_words_but_not_scripts_written_without_spaces(
    before: str, after: str, between: str
) -> None:
    assert word_joiner(before, after) == between
