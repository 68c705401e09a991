"""`POST /v1/audio/speech` on a real `dragoman serve` with its real voices, driven by the openai
SDK: the speech, in each container, is transcribed back by the same server's
`/v1/audio/transcriptions` (Whisper) into the text it was asked to say."""

from __future__ import annotations

import base64
import io
import json
import wave

import httpx
import pytest
from openai import OpenAI

from dragoman.audio.encoding import Format
from harness.realtime_helpers import wer
from harness.server import Server

pytestmark = pytest.mark.e2e

TEXT = "The weather is lovely today, so we will walk to the old harbour after lunch."


def client(server: Server) -> OpenAI:
    return OpenAI(base_url=server.http + "/v1", api_key="sk-local", max_retries=0)


def heard(sdk: OpenAI, audio: bytes, name: str) -> str:
    return sdk.audio.transcriptions.create(file=(name, audio), model="whisper-1").text


@pytest.mark.parametrize(
    ("response_format", "voice"), [("mp3", "alloy"), ("opus", "joe"), ("flac", "hibari")]
)
def test_speech_is_heard_back_as_its_text(server: Server, response_format: Format, voice: str) -> None:
    sdk = client(server)
    speech = sdk.audio.speech.create(model="tts-1", voice=voice, input=TEXT, response_format=response_format)
    extension = "ogg" if response_format == "opus" else response_format
    text = heard(sdk, speech.content, f"speech.{extension}")
    assert wer([TEXT], [text]) <= 0.15, text


def test_streamed_wav_and_sse_carry_the_same_voice(server: Server) -> None:
    sdk = client(server)
    with sdk.audio.speech.with_streaming_response.create(
        model="tts-1", voice="hibari", input=TEXT, response_format="wav"
    ) as response:
        chunks = list(response.iter_bytes())
    assert len(chunks) > 1, "streamed as it is spoken"
    body = b"".join(chunks)
    pcm = body[44:]
    assert wer([TEXT], [heard(sdk, _wav(pcm), "speech.wav")]) <= 0.15
    with httpx.stream(
        "POST",
        server.http + "/v1/audio/speech",
        json={
            "model": "gpt-4o-mini-tts",
            "voice": "hibari",
            "input": TEXT,
            "response_format": "pcm",
            "stream_format": "sse",
        },
        timeout=120,
    ) as stream:
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert wer([TEXT], [heard(sdk, _wav(audio), "speech.wav")]) <= 0.15


def test_a_voice_that_is_not_here_is_a_400(server: Server) -> None:
    response = httpx.post(
        server.http + "/v1/audio/speech",
        json={"model": "tts-1", "voice": "nobody", "input": "Hi."},
        timeout=30,
    )
    assert response.status_code == 400 and response.json()["error"]["param"] == "voice"


def _wav(pcm: bytes) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(24_000)
        writer.writeframes(pcm)
    return out.getvalue()
