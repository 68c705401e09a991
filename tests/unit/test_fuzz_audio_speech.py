"""A property-based fuzzer for `POST /v1/audio/speech`, in-process, on the fake voice of its unit
tests (`test_audio_speech`).

Bodies are valid requests, valid requests mutated (`fuzz_strategies.mutated`), any JSON value,
or bytes that are not JSON. The properties: the server never fails (the test client re-raises
what the route raises); a refusal is a 400 in OpenAI's error shape, an `invalid_request_error`
naming its parameter where it has one; speech is audio of the format asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dragoman.config import TTSSettings
from dragoman.engines.tts.speaker import Speaker
from tests.unit.fuzz_strategies import FUZZ, dumps, json_values, mutated
from tests.unit.test_audio_speech import PATH, Voices, app_of
from tests.unit.test_tts_speaker import Factory

#: A third of the examples: each one spoken is synthesised and encoded.
SPEECH_FUZZ = settings(FUZZ, max_examples=max(FUZZ.max_examples // 3, 1))
MAX_MESSAGE = 600
#: What each response_format starts with (pcm is headerless; SSE is text events).
MAGIC = {
    "mp3": (b"ID3", b"\xff"),
    "wav": (b"RIFF",),
    "flac": (b"fLaC",),
    "opus": (b"OggS",),
    "aac": (b"\xff",),
}

valid = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["tts-1", "gpt-4o-mini-tts", "dragoman-tts"]),
        "input": st.sampled_from(["Hello there.", "Ciao!", "你好。", "A" * 50]),
        "voice": st.one_of(st.sampled_from(["alloy", "hibari"]), st.just({"id": "hibari"})),
    },
    optional={
        "response_format": st.sampled_from(["pcm", "wav", "mp3", "flac", "opus", "aac"]),
        "speed": st.sampled_from([0.25, 1.0, 1.5, 4.0]),
        "instructions": st.text(max_size=20),
        "stream_format": st.sampled_from(["audio", "sse"]),
    },
)
bodies = st.one_of(
    valid.map(dumps),
    mutated(valid).map(dumps),
    mutated(valid).map(dumps),
    json_values.map(dumps),
    st.binary(max_size=40),
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    speaker = Speaker(TTSSettings(), Path(tmp_path_factory.mktemp("tts")), factory=Factory())
    with TestClient(app_of(Voices(speaker))) as client:
        yield client


@SPEECH_FUZZ
@given(bodies)
def test_any_body_is_spoken_or_refused_cleanly(client: TestClient, body: str | bytes) -> None:
    answer = client.post(PATH, content=body, headers={"Content-Type": "application/json"})
    event(f"HTTP {answer.status_code}")  # --hypothesis-show-statistics: how many were spoken
    assert answer.status_code in (200, 400), (answer.status_code, answer.text[:300])
    if answer.status_code == 400:
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error", error
        assert isinstance(error["message"], str) and 0 < len(error["message"]) <= MAX_MESSAGE
        return
    assert answer.content, "speech has audio"
    if answer.headers["content-type"].startswith("text/event-stream"):
        assert b"speech.audio.done" in answer.content
        return
    sent = format_asked(body)
    if sent in MAGIC:
        assert answer.content.startswith(MAGIC[sent]), (sent, answer.content[:8])


def format_asked(body: str | bytes) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return "mp3"
    return str(value.get("response_format", "mp3")) if isinstance(value, dict) else "mp3"
