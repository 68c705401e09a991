"""`POST /v1/audio/speech` on the shared TTS worker with a fake voice (a 220 Hz tone): OpenAI's
request through its own SDK, every response format decoded back, SSE, and the errors."""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from openai import OpenAI

from dragoman.config import TTSSettings
from dragoman.engines.tts.speaker import Speaker
from dragoman.engines.workers import SerialWorker, Streamed
from dragoman.sessions.agent.jobs import SpeakRequest
from dragoman.transports.readiness import Readiness, State
from dragoman.transports.speech import speech_router
from tests.unit.test_tts_speaker import Factory

RATE = 24_000
PATH = "/v1/audio/speech"


class Voices:
    def __init__(self, speaker: Speaker) -> None:
        self.speaker: Speaker | None = speaker
        self.tts_worker: SerialWorker[Streamed[SpeakRequest], None] | None = SerialWorker(
            lambda call: speaker.synthesize(
                call.request.voice,
                call.request.text,
                call.request.speed,
                call.cancel,
                call.emit,
                call.request.rate,
            ),
            name="tts",
        )


async def _no_load() -> None:
    return None


def app_of(voices: Voices | None, state: State = State.READY) -> FastAPI:
    readiness = Readiness(_no_load)
    readiness.state = state
    app = FastAPI()
    app.include_router(speech_router(lambda: voices, readiness, 10.0))
    return app


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(app_of(Voices(Speaker(TTSSettings(), tmp_path, factory=Factory())))) as client:
        yield client


def speak(client: TestClient, **fields: Any) -> Any:
    return client.post(PATH, json={"model": "tts-1", "input": "Hello there.", "voice": "alloy"} | fields)


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.argmax(spectrum) * rate / len(samples))


def test_the_openai_sdk_gets_pcm_of_the_voice(client: TestClient) -> None:
    sdk = OpenAI(api_key="sk-local", base_url=str(client.base_url) + "/v1", http_client=client)
    audio = sdk.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", response_format="pcm")
    samples = np.frombuffer(audio.content, dtype="<i2").astype(np.float32) / 32768
    assert 0.4 < len(samples) / RATE < 0.9, "the tone's half second, with the clause's bounded trail"
    assert abs(dominant_hz(samples, RATE) - 220) < 5


@pytest.mark.parametrize(
    ("response_format", "codec", "media_type"),
    [
        ("mp3", "mp3", "audio/mpeg"),
        ("opus", "opus", "audio/ogg"),
        ("aac", "aac", "audio/aac"),
        ("flac", "flac", "audio/flac"),
    ],
)
def test_each_format_decodes_back_to_the_voice(
    client: TestClient, response_format: str, codec: str, media_type: str
) -> None:
    response = speak(client, response_format=response_format)
    assert response.status_code == 200 and response.headers["content-type"] == media_type
    with av.open(io.BytesIO(response.content), mode="r") as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name.startswith(codec)
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
        rate = stream.codec_context.sample_rate
    samples = np.concatenate(frames).astype(np.float32)
    assert 0.4 < len(samples) / rate < 1.0
    assert abs(dominant_hz(samples, rate) - 220) < 5


def test_wav_streams_a_header_of_unknown_length(client: TestClient) -> None:
    body = speak(client, response_format="wav").content
    assert body[:4] == b"RIFF" and body[8:16] == b"WAVEfmt "
    channels, rate, bits = struct.unpack("<HI", body[22:28]) + struct.unpack("<H", body[34:36])
    assert (channels, rate, bits) == (1, RATE, 16)
    assert body[36:40] == b"data" and body[40:44] == b"\xff\xff\xff\xff"
    pcm = speak(client, response_format="pcm").content
    assert body[44:] == pcm


def test_sse_sends_the_audio_in_deltas_then_done(client: TestClient) -> None:
    response = speak(client, response_format="pcm", stream_format="sse")
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in response.text.split("\n\n") if line.startswith("data: ")]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) > 2
    assert events[-1] == {
        "type": "speech.audio.done",
        "usage": {"input_tokens": 12, "output_tokens": 0, "total_tokens": 12},
    }
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert audio == speak(client, response_format="pcm").content


def test_instructions_are_accepted_and_a_voice_object_names_a_voice(client: TestClient) -> None:
    response = speak(client, voice={"id": "hibari"}, instructions="Speak cheerfully.", response_format="pcm")
    assert response.status_code == 200 and len(response.content) / 2 / RATE > 0.4


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"voice": "nobody"}, "voice"),
        ({"speed": 2.0}, "speed"),
        ({"speed": 5.0}, "speed"),
        ({"speed": 0.1}, "speed"),
        ({"input": "x" * 4097}, "input"),
        ({"input": "   "}, "input"),
        ({"response_format": "ogg"}, "response_format"),
        ({"stream_format": "chunks"}, "stream_format"),
        ({"model": ""}, "model"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_request_is_refused_with_openais_error(
    client: TestClient, fields: dict[str, Any], param: str
) -> None:
    response = speak(client, **fields)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error


def test_bad_json_and_a_missing_field_are_refused(client: TestClient) -> None:
    assert client.post(PATH, content=b"{nope").status_code == 400
    missing = client.post(PATH, json={"model": "tts-1", "input": "Hi."})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "voice"


def test_without_voices_or_while_loading_it_is_refused() -> None:
    with TestClient(app_of(None)) as client:
        absent = speak(client)
    assert absent.status_code == 404 and absent.json()["error"]["code"] == "service_unavailable"
    with TestClient(app_of(None, State.LOADING)) as client:
        loading = speak(client)
    assert loading.status_code == 503 and loading.headers["retry-after"] == "5"
