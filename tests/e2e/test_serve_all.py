"""`dragoman serve` with every service: both protocols on one port, as `make serve` runs it."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest
from websockets.sync.client import connect

from bench.server import Server, start, stop

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start(["serve"], tmp_path_factory.mktemp("serve-all") / "dragoman.log", timeout=600.0)
    yield running
    stop(running)


def test_health_and_models_list_both_services(server: Server) -> None:
    with urllib.request.urlopen(server.http + "/health", timeout=10) as response:
        health = json.loads(response.read())
    assert health["services"] == {"transcription": True, "mt": True}
    with urllib.request.urlopen(server.http + "/v1/models", timeout=10) as response:
        ids = [model["id"] for model in json.loads(response.read())["data"]]
    assert "whisper-base" in ids and "qwen2.5-0.5b-instruct-gguf" in ids


def test_mt_protocol_at_v1_mt(server: Server) -> None:
    with connect(server.ws + "/v1/mt") as ws:
        ws.send(json.dumps({"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}))
        reply = json.loads(ws.recv(timeout=60))
        assert reply["type"] == "init_ok" and reply["direction"] == "en-de"
        words = [["Hello", 0.0, 400.0], ["world.", 450.0, 900.0]]
        ws.send(
            json.dumps(
                {
                    "type": "update",
                    "seq": 1,
                    "utterance_id": 0,
                    "words": words,
                    "clock_ms": 1000.0,
                    "is_final": True,
                }
            )
        )
        translation = json.loads(ws.recv(timeout=120))
    assert translation["type"] == "translation" and translation["final"] is True and translation["seq"] == 1
    assert translation["committed_text"].strip()


def test_transcription_intent_on_the_same_port(server: Server) -> None:
    with connect(server.ws + "/v1/realtime?intent=transcription") as ws:
        created = json.loads(ws.recv(timeout=30))
    assert created["type"] == "session.created" and created["session"]["type"] == "transcription"
