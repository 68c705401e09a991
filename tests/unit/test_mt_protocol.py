"""MT protocol v1 wire models: parsing client frames, encoding server frames."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dragoman.errors import ClientError, InvalidEvent, InvalidValue
from dragoman.protocol.mt import (
    ErrorMessage,
    InitMessage,
    TranslationMessage,
    UpdateMessage,
    encode,
    parse_client_message,
    parse_server_message,
    peek_seq,
)
from dragoman.sessions.mt.events import Error, ErrorCode, InitOk, Translation, Word

SEED_INIT = {
    "type": "init",
    "protocol_version": 1,
    "source_lang": "en",
    "target_lang": "de",
    "preset": "gemma_low_latency",
    "overrides": {"translation_alignatt_inaccessible_ms": 0},
    "context_text": "Talk title, glossary, or domain hints (optional)",
    "history": [["Previous sentence.", "Vorheriger Satz."]],
    "accepted_target_prefix": "",
}

SEED_UPDATE = {
    "type": "update",
    "seq": 42,
    "utterance_id": 3,
    "words": [["Hello", 120.0, 400.0], ["world,", 520.0, 900.0]],
    "tail": {"words": [["how", None, None], ["are", None, None]]},
    "clock_ms": 2350.0,
    "is_final": False,
}


def frame(base: dict[str, Any], **changes: Any) -> str:
    data = {**base, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not ...})


def test_the_seed_init_parses() -> None:
    message = parse_client_message(frame(SEED_INIT))
    assert isinstance(message, InitMessage)
    event = message.to_event()
    assert (event.protocol_version, event.source_lang, event.target_lang) == (1, "en", "de")
    assert event.preset == "gemma_low_latency"
    assert event.overrides == {"translation_alignatt_inaccessible_ms": 0}
    assert event.history == (("Previous sentence.", "Vorheriger Satz."),)


def test_a_minimal_init_has_defaults_and_unknown_fields_are_ignored() -> None:
    raw = json.dumps(
        {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "it", "x": 1}
    )
    message = parse_client_message(raw)
    assert isinstance(message, InitMessage)
    event = message.to_event()
    assert (
        event.preset,
        event.overrides,
        event.context_text,
        event.history,
        event.accepted_target_prefix,
    ) == (
        None,
        {},
        None,
        (),
        "",
    )


def test_the_seed_update_parses_with_null_timestamps_in_the_tail() -> None:
    message = parse_client_message(frame(SEED_UPDATE))
    assert isinstance(message, UpdateMessage)
    event = message.to_event()
    assert event.words == (Word("Hello", 120.0, 400.0), Word("world,", 520.0, 900.0))
    assert event.tail == ("how", "are")
    assert (event.seq, event.utterance_id, event.clock_ms, event.is_final) == (42, 3, 2350.0, False)


def test_committed_words_may_lack_timestamps_and_the_tail_is_optional() -> None:
    message = parse_client_message(
        frame(SEED_UPDATE, words=[["Hi", None, None], [" there ", 1, 2]], tail=..., is_final=...)
    )
    assert isinstance(message, UpdateMessage)
    event = message.to_event()
    assert event.words == (Word("Hi"), Word("there", 1.0, 2.0))
    assert event.tail == () and event.is_final is False


@pytest.mark.parametrize(
    ("raw", "error", "needle"),
    [
        (b'{"type": "init"}', InvalidEvent, "binary"),
        ("not json", InvalidEvent, "not valid JSON"),
        ("[1, 2]", InvalidEvent, "JSON object"),
        ('{"seq": 1}', InvalidEvent, "type"),
        ('{"type": "translate"}', InvalidEvent, "Unknown message type 'translate'"),
        (frame(SEED_INIT, protocol_version="1"), InvalidValue, "protocol_version"),
        (frame(SEED_INIT, target_lang=...), InvalidValue, "target_lang"),
        (frame(SEED_INIT, history=[["only one"]]), InvalidValue, "history[0]"),
        (frame(SEED_UPDATE, seq=True), InvalidValue, "seq"),
        (frame(SEED_UPDATE, seq=...), InvalidValue, "seq"),
        (frame(SEED_UPDATE, utterance_id=-1), InvalidValue, "utterance_id"),
        (frame(SEED_UPDATE, words=[["Hello", 1.0]]), InvalidValue, "words[0]"),
        (frame(SEED_UPDATE, words=[["  ", 1.0, 2.0]]), InvalidValue, "words[0][0]"),
        (frame(SEED_UPDATE, words=[[3, 1.0, 2.0]]), InvalidValue, "words[0][0]"),
        (frame(SEED_UPDATE, words=[["a", "1", 2.0]]), InvalidValue, "words[0][1]"),
        (frame(SEED_UPDATE, words=[["a", -1.0, 2.0]]), InvalidValue, "words[0][1]"),
        (frame(SEED_UPDATE, words="Hello world"), InvalidValue, "words"),
        (frame(SEED_UPDATE, tail={"words": [["x"]]}), InvalidValue, "tail.words[0]"),
        (frame(SEED_UPDATE, clock_ms=None), InvalidValue, "clock_ms"),
        (frame(SEED_UPDATE, is_final="yes"), InvalidValue, "is_final"),
        (
            '{"type": "update", "seq": 1, "utterance_id": 0, "words": [], "clock_ms": NaN}',
            InvalidValue,
            "clock_ms",
        ),
    ],
)
def test_malformed_frames_are_client_errors_with_a_clear_message(
    raw: str | bytes, error: type[ClientError], needle: str
) -> None:
    with pytest.raises(error) as caught:
        parse_client_message(raw)
    assert needle in caught.value.message


def test_peek_seq_recovers_the_seq_of_a_bad_update() -> None:
    assert peek_seq(frame(SEED_UPDATE, words="bad")) == 42
    assert peek_seq('{"seq": true}') is None
    assert peek_seq("[]") is None
    assert peek_seq("nope") is None


def test_translation_frames_carry_null_coverage_and_the_exact_delta() -> None:
    raw = encode(Translation(42, 3, False, "Hallo Welt,", " Welt,", "wie", None, "alignatt:commit_fast_path"))
    data = json.loads(raw)
    assert data == {
        "type": "translation",
        "seq": 42,
        "utterance_id": 3,
        "final": False,
        "forced_final": False,
        "committed_text": "Hallo Welt,",
        "committed_delta": " Welt,",
        "buffer_text": "wie",
        "covered_source_units": None,
        "stop_reason": "alignatt:commit_fast_path",
    }
    assert isinstance(parse_server_message(raw), TranslationMessage)


def test_error_frames_leave_out_what_they_lack() -> None:
    data = json.loads(encode(Error(ErrorCode.UNSUPPORTED_DIRECTION, "no", supported=("en-de", "en-it"))))
    assert data == {
        "type": "error",
        "code": "unsupported_direction",
        "message": "no",
        "supported": ["en-de", "en-it"],
    }
    raw = encode(Error(ErrorCode.PROCESSING_FAILED, "failed", seq=7, error_id="err_1"))
    message = parse_server_message(raw)
    assert (
        isinstance(message, ErrorMessage) and message.seq == 7 and message.code is ErrorCode.PROCESSING_FAILED
    )


def test_init_ok_frame() -> None:
    data = json.loads(encode(InitOk("en-de", "low_latency", "qwen")))
    assert data == {
        "type": "init_ok",
        "protocol_version": 1,
        "direction": "en-de",
        "preset": "low_latency",
        "model": "qwen",
    }


def test_text_is_sent_as_utf8_not_escaped() -> None:
    raw = encode(Translation(1, 0, True, "你好", "你好", "", 1, "final"))
    assert "你好" in raw
