"""POST /v1/audio/transcriptions on the wire: form fields, each response format, events, errors
(checked against the `openai` SDK's own types)."""

from __future__ import annotations

import pytest
from openai.types.audio import Transcription, TranscriptionVerbose
from openai.types.audio.transcription_text_delta_event import TranscriptionTextDeltaEvent
from openai.types.audio.transcription_text_done_event import TranscriptionTextDoneEvent

from dragoman.errors import EngineFailure, FileTooLarge, InvalidValue
from dragoman.protocol import audio_transcriptions as wire
from dragoman.sessions.file_transcription import FileTranscript, Segment

SEGMENTS = [
    Segment(0, 0.152, 10.792, " And so my fellow Americans,", [400, 370], -0.21, 0.06, 1.1, 15),
    Segment(1, 12.0, 3725.5049, " ask not.", [1029, 406], -0.3, 0.01, 0.9, 1200),
]
RESULT = FileTranscript(
    text="And so my fellow Americans, ask not.",
    language="english",
    duration=3726.0,
    segments=SEGMENTS,
    output_tokens=4,
    prompt_tokens=3,
)


def _params(**fields: str | list[str]) -> wire.TranscriptionParams:
    form = {key: value if isinstance(value, list) else [value] for key, value in fields.items()}
    return wire.TranscriptionParams.from_form(form)


def test_defaults_and_the_sdks_field_names() -> None:
    params = _params(model="whisper-1")
    assert params.response_format == "json" and not params.stream and params.temperature == 0.0
    params = _params(
        model="gpt-4o-transcribe",
        language="en",
        prompt="",
        response_format="verbose_json",
        temperature="0.2",
        stream="false",
        **{"timestamp_granularities[]": ["segment", "segment"]},
    )
    assert params.timestamp_granularities == ("segment",) and params.prompt is None
    assert params.wants_segments and params.temperature == 0.2
    assert _params(model="m", stream="true").stream


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({}, "model"),
        ({"model": "m", "response_format": "xml"}, "response_format"),
        ({"model": "m", "temperature": "1.5"}, "temperature"),
        ({"model": "m", "temperature": "hot"}, "temperature"),
        (
            {"model": "m", "timestamp_granularities[]": "sentence", "response_format": "verbose_json"},
            "timestamp_granularities",
        ),
        ({"model": "m", "timestamp_granularities[]": "segment"}, "timestamp_granularities"),
        ({"model": "m", "stream": "true", "response_format": "srt"}, "response_format"),
        ({"model": "m", "language": "x" * 40}, "language"),
    ],
)
def test_bad_fields_are_400s_naming_the_field(fields: dict[str, str], param: str) -> None:
    with pytest.raises(InvalidValue) as raised:
        _params(**fields)
    assert raised.value.status == 400 and raised.value.param == param


def test_json_and_verbose_json_are_the_sdks_types() -> None:
    body = wire.json_body(RESULT)
    parsed = Transcription.model_validate(body)
    assert parsed.text == RESULT.text and parsed.usage is not None and parsed.usage.type == "duration"
    verbose = wire.verbose_body(RESULT, _params(model="m", response_format="verbose_json"))
    full = TranscriptionVerbose.model_validate(verbose)
    assert full.language == "english" and full.duration == 3726.0
    assert full.segments is not None and [s.id for s in full.segments] == [0, 1]
    assert full.segments[1].end == 3725.505 and full.segments[0].tokens == [400, 370]
    assert full.words is None


def test_srt_numbers_cues_with_comma_milliseconds_and_hours() -> None:
    assert wire.srt(SEGMENTS) == (
        "1\n00:00:00,152 --> 00:00:10,792\nAnd so my fellow Americans,\n\n"
        "2\n00:00:12,000 --> 01:02:05,505\nask not.\n\n"
    )


def test_vtt_has_its_header_and_dot_milliseconds() -> None:
    assert wire.vtt(SEGMENTS) == (
        "WEBVTT\n\n"
        "00:00:00.152 --> 00:00:10.792\nAnd so my fellow Americans,\n\n"
        "00:00:12.000 --> 01:02:05.505\nask not.\n\n"
    )
    assert wire.vtt([]) == "WEBVTT\n\n" and wire.srt([Segment(0, 0.0, 1.0, "  ")]) == ""


def test_stream_events_are_the_sdks_types() -> None:
    delta = TranscriptionTextDeltaEvent.model_validate(wire.delta_event(" ask"))
    assert delta.type == "transcript.text.delta" and delta.delta == " ask"
    done = TranscriptionTextDoneEvent.model_validate(wire.done_event(RESULT))
    assert done.text == RESULT.text and done.usage is not None
    assert done.usage.input_tokens == 3726 * 50 + 3 and done.usage.output_tokens == 4
    assert done.usage.total_tokens == done.usage.input_tokens + 4


def test_errors_are_openai_shaped_and_server_faults_carry_only_an_id() -> None:
    too_big = FileTooLarge("The file is larger than 10 bytes.", param="file")
    assert wire.status_of(too_big) == 413
    assert wire.error_body(too_big)["error"] == {
        "message": "The file is larger than 10 bytes.",
        "type": "invalid_request_error",
        "param": "file",
        "code": "file_too_large",
    }
    fault = EngineFailure("ctranslate2 blew up at /srv/models/x", error_id="err_1")
    body = wire.error_body(fault)["error"]
    assert wire.status_of(fault) == 500 and "srv" not in body["message"] and "err_1" in body["message"]
