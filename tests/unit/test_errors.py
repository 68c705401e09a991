"""No server path reaches a client: `scrub` keeps only base names, and cuts long messages."""

from __future__ import annotations

import pytest

from dragoman.errors import MAX_ERROR_CHARS, EngineFailure, scrub, with_error_id


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("cannot load /srv/models/x/model.bin: bad magic", "cannot load model.bin: bad magic"),
        # A folder with a space: none of its name may survive.
        ("cannot load /srv/my models/x/model.bin: bad magic", "cannot load model.bin: bad magic"),
        ("C:\\Program Files\\dragoman\\m.bin failed", "m.bin failed"),
        # The words after a path are not part of its name.
        ("see /tmp/x/y.txt now", "see y.txt now"),
        ("no path here", "no path here"),
    ],
)
def test_paths_are_cut_to_their_base_names(message: str, expected: str) -> None:
    assert scrub(message) == expected


def test_long_messages_are_cut() -> None:
    text = scrub("word " * 500)
    assert len(text) == MAX_ERROR_CHARS and text.endswith("…")


def test_a_server_fault_shows_only_its_error_id() -> None:
    error = EngineFailure("/srv/secret/model.bin: CUDA out of memory", error_id="err_1")
    assert error.public_message == "The server failed to process the request (error id err_1)."
    assert with_error_id("Translation failed", None) == "Translation failed."
