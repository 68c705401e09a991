"""The Realtime transcription transport in-process: the app, the driver and a session, no model.

A counting "recogniser" stands in for Whisper (registered as an ASR backend), so
the whole path runs: the WebSocket route, the Realtime codec, the session on the
driver, its steps batched on the ASR worker, and the events back in order.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from dragoman.config import ASRSettings, Settings
from dragoman.engines import registry
from dragoman.engines.asr.base import ASRCapabilities, ASREngine, PrefixMode, StepRequest, StepResult
from dragoman.errors import ClientError
from dragoman.transports.app import create_app
from tests.unit.fakes import WordTokenizer
from tests.unit.polling import wait_for

URL = "/v1/realtime?intent=transcription"
RATE = 24_000


class CountingEngine(ASREngine):
    """Transcribes audio as one word per started second: " one", " one two", ..."""

    name = "counting"
    capabilities = ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT)
    tokenizer = WordTokenizer()
    WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

    def __init__(self) -> None:
        self.batches: list[int] = []

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        self.batches.append(len(requests))
        if any(request.prompt == "crash the engine" for request in requests):
            raise RuntimeError("/srv/models/secret.bin: engine fault")
        out: list[StepResult | ClientError] = []
        for request in requests:
            seconds = -(-len(request.audio) // self.capabilities.sample_rate)
            out.append(StepResult("".join(f" {w}" for w in self.WORDS[:seconds]), language="en"))
        return out


ENGINES: list[CountingEngine] = []


def create_counting(settings: ASRSettings, cache_dir: Path) -> ASREngine:
    ENGINES.append(CountingEngine())
    return ENGINES[-1]


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setitem(registry.ASR_BACKENDS, "counting", f"{__name__}:create_counting")
    settings = Settings(services=["transcription"], asr=ASRSettings(backend="counting", model="counting"))
    with TestClient(create_app(settings)) as test_client:
        wait_for(lambda: test_client.get("/health").status_code == 200, timeout=10)
        yield test_client


def pcm(seconds: float) -> str:
    """`seconds` of a quiet tone as base64 pcm16 at 24 kHz."""
    t = np.arange(int(seconds * RATE)) / RATE
    samples = (0.01 * np.sin(2 * np.pi * 220 * t) * 32767).astype("<i2")
    return base64.b64encode(samples.tobytes()).decode()


def receive_until(ws: Any, kind: str) -> list[dict[str, Any]]:
    events = []
    while True:
        events.append(ws.receive_json())
        if events[-1]["type"] == kind:
            return events


def test_a_committed_item_is_transcribed_through_the_driver(client: TestClient) -> None:
    with client.websocket_connect(URL) as ws:
        assert ws.receive_json()["type"] == "session.created"
        ws.send_json(
            {
                "type": "session.update",
                "session": {"type": "transcription", "audio": {"input": {"turn_detection": None}}},
            }
        )
        assert ws.receive_json()["type"] == "session.updated"
        ws.send_json({"type": "input_audio_buffer.append", "audio": pcm(2.5)})
        ws.send_json({"type": "input_audio_buffer.commit"})
        events = receive_until(ws, "conversation.item.input_audio_transcription.completed")
    kinds = [e["type"] for e in events]
    # 2.5 s is more than one 2 s chunk: a partial step may run before the commit.
    assert "input_audio_buffer.committed" in kinds
    assert set(kinds) <= {
        "input_audio_buffer.committed",
        "mstar.transcription.partial",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
    }
    completed = events[-1]
    assert completed["transcript"] == "one two three"
    deltas = "".join(e["delta"] for e in events if e["type"].endswith(".delta"))
    assert deltas == completed["transcript"]  # append-only deltas add up to the transcript
    assert completed["usage"] == {"type": "duration", "seconds": 2.5}


def test_a_bad_frame_gets_an_error_and_the_session_goes_on(client: TestClient) -> None:
    with client.websocket_connect(URL) as ws:
        ws.receive_json()
        ws.send_bytes(b"\x00\x01")
        assert ws.receive_json()["error"]["code"] == "invalid_event"
        ws.send_text("{not json")
        assert ws.receive_json()["type"] == "error"
        ws.send_json({"type": "input_audio_buffer.commit", "event_id": "e1"})
        error = ws.receive_json()["error"]
        assert (error["code"], error["event_id"]) == ("input_audio_buffer_commit_empty", "e1")
        ws.send_json({"type": "input_audio_buffer.clear"})
        assert ws.receive_json()["type"] == "input_audio_buffer.cleared"
        ws.send_json({"type": "x" * 100_000})  # a client string in an error comes back cut
        error = ws.receive_json()["error"]
        assert error["code"] == "invalid_event" and len(error["message"]) < 200


def test_a_session_bug_is_an_error_with_an_id_and_the_connection_lives(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.sessions.transcription.session import TranscriptionSession

    original = TranscriptionSession.receive
    calls = {"n": 0}

    def flaky(self: TranscriptionSession, event: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("/srv/secret/state is broken")
        original(self, event)

    monkeypatch.setattr(TranscriptionSession, "receive", flaky)
    with client.websocket_connect(URL) as ws:
        ws.receive_json()
        ws.send_json({"type": "input_audio_buffer.clear"})
        error = ws.receive_json()["error"]
        assert error["type"] == "server_error" and "error id err_" in error["message"]
        assert "secret" not in error["message"]
        ws.send_json({"type": "input_audio_buffer.clear"})
        assert ws.receive_json()["type"] == "input_audio_buffer.cleared"


LOADING = threading.Event()


def create_slowly(settings: ASRSettings, cache_dir: Path) -> ASREngine:
    assert LOADING.wait(10)
    return CountingEngine()


def test_sessions_are_refused_until_the_engine_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.ASR_BACKENDS, "slow", f"{__name__}:create_slowly")
    LOADING.clear()
    settings = Settings(services=["transcription"], asr=ASRSettings(backend="slow", model="slow"))
    with TestClient(create_app(settings)) as test_client:
        assert test_client.get("/health").json()["status"] == "loading"
        with test_client.websocket_connect(URL) as ws:
            error = ws.receive_json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "server_not_ready")
        LOADING.set()
        wait_for(lambda: test_client.get("/health").status_code == 200, timeout=10)
        with test_client.websocket_connect(URL) as ws:
            assert ws.receive_json()["type"] == "session.created"


def test_an_engine_fault_on_one_session_leaves_the_others_correct(client: TestClient) -> None:
    manual = {
        "type": "session.update",
        "session": {"type": "transcription", "audio": {"input": {"turn_detection": None}}},
    }
    faulty = {
        "type": "session.update",
        "session": {
            "type": "transcription",
            "audio": {"input": {"turn_detection": None, "transcription": {"prompt": "crash the engine"}}},
        },
    }
    with client.websocket_connect(URL) as good, client.websocket_connect(URL) as bad:
        for ws, update in ((good, manual), (bad, faulty)):
            ws.receive_json()
            ws.send_json(update)
            assert ws.receive_json()["type"] == "session.updated"
        for ws in (bad, good):
            ws.send_json({"type": "input_audio_buffer.append", "audio": pcm(1.5)})
            ws.send_json({"type": "input_audio_buffer.commit"})
        failed = receive_until(bad, "conversation.item.input_audio_transcription.failed")[-1]
        completed = receive_until(good, "conversation.item.input_audio_transcription.completed")[-1]
    assert completed["transcript"] == "one two"
    error = failed["error"]
    assert "err_" in error["message"] and "secret" not in error["message"] and "/srv" not in error["message"]
    assert client.get("/health").status_code == 200


def test_a_client_that_leaves_mid_step_leaves_nothing_behind(client: TestClient) -> None:
    app: Any = client.app
    runtime, policy = app.state.runtime, app.state.policy
    for _ in range(3):
        with client.websocket_connect(URL) as ws:
            ws.receive_json()
            ws.send_json({"type": "input_audio_buffer.append", "audio": pcm(2.5)})  # a step is due
        # Gone without a commit or a close of its own, possibly mid-step.
    wait_for(lambda: runtime.transcription.sessions == 0 and len(policy.connections) == 0, timeout=10)
    assert runtime.transcription.worker.stats.queued == 0
    with client.websocket_connect(URL) as ws:
        assert ws.receive_json()["type"] == "session.created", "and the next client is served"
