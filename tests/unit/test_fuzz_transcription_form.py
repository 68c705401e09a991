"""A property-based fuzzer for the form of `POST /v1/audio/transcriptions`: its text fields
(`TranscriptionParams.from_form`, which reads them as the multipart form gives them: each
name with its list of values), and the multipart body itself as the route reads it.

Forms are drawn from OpenAI's field names with values that are valid, near-valid ("1e999",
"nan", "-0", " ", "TRUE") or any text, repeated, and with other names beside them. The
properties: a form is read or refused as the client's fault (`ClientError`, a 400 with the
field it names), never anything else (the route would answer a 500); what is read is in
range and asks the engine for a consistent request. Bodies are well-formed multipart,
damaged (bytes written over, cut or grown), under any content type and with a
`Content-Length` that is right, missing, short, huge or not a number: each is read or refused
as the client's fault (400, or 413 past the size limit).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from hypothesis import event, example, given
from hypothesis import strategies as st

from dragoman.errors import ClientError
from dragoman.protocol.audio_transcriptions import TranscriptionParams
from dragoman.transports.audio_transcriptions import _read_form
from tests.unit.fuzz_strategies import FUZZ

NAMES = (
    "model",
    "language",
    "prompt",
    "response_format",
    "temperature",
    "stream",
    "timestamp_granularities[]",
    "timestamp_granularities",
    "include[]",
    "chunking_strategy",
)
NEAR = (
    "whisper-1",
    "gpt-4o-transcribe",
    "en",
    "zh",
    "json",
    "text",
    "srt",
    "vtt",
    "verbose_json",
    "diarized_json",
    "word",
    "segment",
    "true",
    "false",
    "TRUE",
    "1",
    "0",
    "-0",
    "0.5",
    "1.5",
    "-1",
    "1e999",
    "-1e999",
    "nan",
    "NaN",
    "inf",
    "Infinity",
    "",
    " ",
    "\x00",
    "null",
    "[]",
    "{}",
)
values = st.lists(st.one_of(st.sampled_from(NEAR), st.text(max_size=40)), min_size=1, max_size=3)
any_form = st.dictionaries(st.one_of(st.sampled_from(NAMES), st.text(max_size=12)), values, max_size=8)
#: Half the forms name a model, as every client's does, so that the other fields are read too.
forms = st.one_of(any_form.map(lambda form: {**form, "model": ["whisper-1"]}), any_form)


@FUZZ
@given(forms)
@example({"model": ["whisper-1"], "temperature": ["nan"]})
@example({"model": ["whisper-1"], "temperature": ["1e999"]})
@example({"model": ["whisper-1"], "stream": ["true"], "response_format": ["srt"]})
def test_any_form_is_read_or_refused_as_the_clients_fault(form: dict[str, list[str]]) -> None:
    try:
        params = TranscriptionParams.from_form(form)
    except ClientError as refused:
        event("refused")
        assert refused.status == 400 and refused.message
        return
    event("read")
    assert form.get("model"), "a form without a model is refused"
    assert math.isfinite(params.temperature) and 0 <= params.temperature <= 1
    if params.timestamp_granularities:
        assert params.response_format == "verbose_json"
    if params.stream:
        assert params.response_format in ("json", "text")
    request = params.file_request()
    assert request.word_times or not request.words


# -- the multipart body ---------------------------------------------------------------------

LIMIT = 4096
BOUNDARY = "fuzzboundary"


def multipart(fields: list[tuple[str, str]], file: bytes | None) -> bytes:
    """A well-formed multipart/form-data body of `fields` and, when given, the upload `file`."""
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields
    ]
    if file is not None:
        parts.append(
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n".encode()
            + file
            + b"\r\n"
        )
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def reader() -> FastAPI:
    """The endpoint's form reading alone, behind a route that says what it read."""
    served = FastAPI()

    @served.post("/read")
    async def read(request: Request) -> dict[str, Any]:
        try:
            params, data = await _read_form(request, LIMIT)
        except ClientError as refused:
            return {"refused": refused.status, "message": refused.message}
        return {"model": params.model, "bytes": len(data)}

    return served


def damaged(body: bytes, cuts: list[tuple[int, bytes]]) -> bytes:
    """`body` with each (position, bytes) written over it: truncated, overwritten or grown."""
    for position, patch in cuts:
        at = position % (len(body) + 1)
        body = body[:at] + patch + body[at + len(patch) :]
    return body


# Half of what is drawn is a request as a client sends it (a model, a file within the limit,
# the body undamaged, its type and length right), so that the reading itself is exercised.
fields = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(NEAR)), max_size=4)
bodies = st.builds(
    multipart,
    st.one_of(fields.map(lambda given: [("model", "whisper-1"), *given]), fields),
    st.one_of(st.binary(min_size=1, max_size=64), st.none(), st.just(bytes(LIMIT + 1))),
)
patches: st.SearchStrategy[list[tuple[int, bytes]]] = st.one_of(
    st.just([]),
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.one_of(
                st.binary(max_size=16), st.sampled_from([b"\r\n", b"--", BOUNDARY.encode(), b'"', b";"])
            ),
        ),
        min_size=1,
        max_size=3,
    ),
)
RIGHT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"
content_types = st.one_of(
    st.just(RIGHT_TYPE),
    st.sampled_from(
        [
            "multipart/form-data",
            "multipart/form-data; boundary=",
            f'multipart/form-data; boundary="{BOUNDARY}"',
            "multipart/form-data; boundary=other",
            "application/json",
            "",
        ]
    ),
)
lengths = st.one_of(st.just("exact"), st.sampled_from(["missing", "short", "huge", "junk"]))


@FUZZ
@given(bodies, patches, content_types, lengths)
def test_any_multipart_body_is_read_or_refused_as_the_clients_fault(
    body: bytes, cuts: list[tuple[int, bytes]], content_type: str, length: str
) -> None:
    data = damaged(body, cuts)
    headers = {"content-type": content_type} if content_type else {}
    declared = {"exact": str(len(data)), "short": str(max(0, len(data) - 7)), "huge": "9" * 30, "junk": "12x"}
    if length in declared:
        headers["content-length"] = declared[length]
    with TestClient(reader()) as client:  # a route that raises fails the test here
        response = client.post("/read", content=data, headers=headers)
    assert response.status_code == 200
    answer = response.json()
    if "refused" in answer:
        event(f"refused {answer['refused']}")
        assert answer["refused"] in (400, 413) and answer["message"]
    else:
        event("read")
        assert answer["model"] and 0 <= answer["bytes"] <= LIMIT
