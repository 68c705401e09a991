"""`dragoman serve` with every service: both protocols on one port, as `make serve` runs it."""

from __future__ import annotations

import json
import urllib.request

import pytest
from websockets.sync.client import connect

from harness.server import Server

pytestmark = pytest.mark.e2e

# `server` (tests/e2e/conftest.py) is the `dragoman serve` test_transcription_e2e drives too.


def test_health_and_models_list_every_service(server: Server) -> None:
    with urllib.request.urlopen(server.http + "/health", timeout=10) as response:
        health = json.loads(response.read())
    assert health["services"] == {"transcription": True, "mt": True, "agent": True, "interpreter": True}
    with urllib.request.urlopen(server.http + "/v1/models", timeout=10) as response:
        ids = [model["id"] for model in json.loads(response.read())["data"]]
    # The agent's brain is `auto`'s choice for this CPU: the 1.5B or the 0.5B (docs/agent.md).
    assert "whisper-base" in ids and {"qwen2.5-0.5b-instruct-gguf", "qwen2.5-1.5b-instruct-gguf"} & set(ids)


def test_health_shows_each_engine_and_the_compute_path_this_cpu_gets(server: Server) -> None:
    with urllib.request.urlopen(server.http + "/health", timeout=10) as response:
        health = json.loads(response.read())
    assert health["status"] == "ok" and health["load_seconds"] > 0
    engines = {engine["service"]: engine for engine in health["engines"]}
    assert engines["transcription"]["name"] == "whisper-base"
    assert engines["transcription"]["compute_type"].startswith("int8")
    # On a CPU, Whisper's share of the cores runs as that many calls of one thread each.
    assert engines["transcription"]["parallel_calls"] == engines["transcription"]["threads"] >= 1
    mt = engines["mt"]
    # The default `auto`: the 1.5B on llama.cpp where it measured fast enough, else the 0.5B
    # (the choice and its reason are in the log, "MT model chosen").
    assert mt["name"] in ("qwen2.5-1.5b-instruct-gguf", "qwen2.5-0.5b-instruct-gguf")
    assert (mt["backend"], mt["device"], mt["compute_type"]) == ("qwen-llama", "cpu", "gguf")
    assert "llama.cpp" in mt["compute_reason"]


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
