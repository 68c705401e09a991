"""A remote TTS backend, for real: one `dragoman serve` is the TTS node, another speaks through
its `POST /v1/audio/speech` (`--tts-base-url`), both on loopback.

The front-end's own `/v1/audio/speech` (and with it every voice of its agent) comes from the
node and is heard back by the front-end's Whisper as the text it was asked to say. When the node
is gone, speech fails with a server error and an error id, while transcription, which needs no
voice, goes on. The front-end's catalog has hibari only: joe is a voice only the node knows, passed
on by name, and a name neither knows is the node's to refuse.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from dragoman.engines.tts.openai_speech import TTSServerError, TTSServerUnavailable
from harness.realtime_helpers import wer
from harness.server import Server, start, stop

pytestmark = pytest.mark.e2e

TEXT = "The weather is lovely today, so we will walk to the old harbour after lunch."


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[tuple[Server, Server]]:
    folder = tmp_path_factory.mktemp("remote-tts")
    node = start(["serve", "--cache-dir", str(cache_dir), "--services", "agent"], folder / "node.log", 900.0)
    try:
        config = folder / "front.toml"
        config.write_text('[tts]\nbackends = ["hibari"]\n')
        args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "agent"]
        args += ["--config", str(config), "--tts-base-url", node.http + "/v1"]
        front = start(args, folder / "front.log", 900.0)
    except BaseException:
        stop(node)
        raise
    yield node, front
    stop(front)
    stop(node)


def sdk(server: Server) -> OpenAI:
    return OpenAI(base_url=server.http + "/v1", api_key="sk-local", max_retries=0)


def speak(server: Server, voice: str = "alloy") -> httpx.Response:
    body = {"model": "tts-1", "voice": voice, "input": TEXT, "response_format": "mp3"}
    return httpx.post(server.http + "/v1/audio/speech", json=body, timeout=120)


def test_the_front_end_speaks_through_the_node_until_it_is_gone(servers: tuple[Server, Server]) -> None:
    node, front = servers
    with urllib.request.urlopen(front.http + "/health", timeout=10) as response:
        engines = json.loads(response.read())["engines"]
    tts = [e for e in engines if e.get("role") == "tts"]
    assert tts and all(e["backend"] == "openai-speech" and e["device"] == "remote" for e in tts), tts

    for voice in ("alloy", "joe"):
        speech = speak(front, voice)
        assert speech.status_code == 200, speech.text
        text = (
            sdk(front)
            .audio.transcriptions.create(file=("speech.mp3", speech.content), model="whisper-1")
            .text
        )
        assert wer([TEXT], [text]) <= 0.15, (voice, text)
    assert "POST /v1/audio/speech" in node.log_tail(200_000), "the node spoke"
    unknown = speak(front, "af_bella")  # no voice of the front-end's or the node's
    assert unknown.status_code == 500, unknown.text
    assert unknown.json()["error"]["code"] == TTSServerError.code

    stop(node)
    down = speak(front)
    assert down.status_code == 500, down.text
    error = down.json()["error"]
    assert error["code"] == TTSServerUnavailable.code and "error id err_" in error["message"], error
    # Transcription needs no voice: untouched.
    heard = sdk(front).audio.transcriptions.create(file=("speech.mp3", speech.content), model="whisper-1")
    assert wer([TEXT], [heard.text]) <= 0.15
