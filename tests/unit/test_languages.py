"""Language codes reduced to their primary subtag, the key every engine and policy uses."""

from __future__ import annotations

import pytest

from dragoman.languages import is_unsegmented, primary_subtag


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
