"""The MT WebSocket service in-process (Starlette's test client, a fake engine, no model)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from dragoman.config import Settings
from dragoman.engines.mt.base import WARM_UP_KEY, MTDraft, MTRequest
from dragoman.engines.workers import SerialWorker
from dragoman.errors import ConfigError
from dragoman.sessions.mt.events import Update
from dragoman.sessions.mt.session import MTSession
from dragoman.streaming.alignatt import AlignAttParams
from dragoman.streaming.alignatt_presets import policy_presets
from dragoman.transports.mt_app import create_mt_app
from dragoman.transports.services import MTService
from harness.mt_fakes import FakeEngine
from tests.unit.polling import wait_for

INIT = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}


class GatedEngine(FakeEngine):
    """Drafts wait for `gate`; records the most drafts ever running at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def draft(self, request: MTRequest) -> MTDraft:
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            self.gate.wait(10)
            return super().draft(request)
        finally:
            with self._lock:
                self.running -= 1


def make_service(engine: FakeEngine, **kwargs: Any) -> MTService:
    options: dict[str, Any] = {
        "default_preset": "plain",
        "max_sessions": 2,
        "max_utterance_words": 50,
    } | kwargs
    return MTService(lambda: engine, presets={"plain": AlignAttParams(frontier_margin=0)}, **options)


@pytest.fixture
def engine() -> GatedEngine:
    return GatedEngine()


@pytest.fixture
def service(engine: GatedEngine) -> MTService:
    return make_service(engine)


@pytest.fixture
def client(service: MTService) -> Iterator[TestClient]:
    with TestClient(create_mt_app(Settings(), service)) as test_client:
        wait_for(lambda: test_client.get("/health").status_code == 200)
        yield test_client


def update(
    seq: int, words: list[str], *, utterance: int = 0, final: bool = False, tail: Sequence[str] = ()
) -> str:
    payload: dict[str, Any] = {
        "type": "update",
        "seq": seq,
        "utterance_id": utterance,
        "words": [[w, 100.0 * i, 100.0 * i + 50] for i, w in enumerate(words)],
        "clock_ms": 100.0 * len(words) + 1000 * seq,
        "is_final": final,
    }
    if tail:
        payload["tail"] = {"words": [[w, None, None] for w in tail]}
    return json.dumps(payload)


def test_health_and_a_session_round_trip(client: TestClient) -> None:
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["model"] == "fake-lexicon"
    assert health["directions"] == ["en-de", "en-it", "en-zh"]
    with client.websocket_connect("/") as ws:
        ws.send_text(json.dumps(INIT))
        assert ws.receive_json() == {
            "type": "init_ok",
            "protocol_version": 1,
            "direction": "en-de",
            "preset": "plain",
            "model": "fake-lexicon",
        }
        ws.send_text(update(1, ["Hello"], tail=["world,", "how"]))
        first = ws.receive_json()
        assert (first["seq"], first["committed_text"], first["buffer_text"]) == (1, "Hallo", "Welt, wie")
        ws.send_text(update(2, ["Hello", "world,"], tail=["how"]))
        second = ws.receive_json()
        assert (second["committed_delta"], second["stop_reason"]) == (" Welt,", "alignatt:commit_fast_path")
        ws.send_text(update(3, ["Hello", "world,", "how"], final=True))
        final = ws.receive_json()
        assert (final["final"], final["committed_text"]) == (True, "Hallo Welt, wie")


def test_an_unsupported_direction_gets_the_list_then_the_close(client: TestClient) -> None:
    with client.websocket_connect("/") as ws:
        ws.send_text(json.dumps(INIT | {"target_lang": "fr"}))
        error = ws.receive_json()
        assert error["code"] == "unsupported_direction" and error["supported"] == ["en-de", "en-it", "en-zh"]
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 1008


def test_a_bad_first_frame_is_bad_protocol_then_the_close(client: TestClient) -> None:
    with client.websocket_connect("/") as ws:
        ws.send_text(update(5, ["Hello"]))
        error = ws.receive_json()
        assert (error["code"], error["seq"]) == ("bad_protocol", 5)
        with pytest.raises(WebSocketDisconnect):
            ws.receive_json()


def test_busy_at_max_sessions(client: TestClient, service: MTService) -> None:
    with client.websocket_connect("/") as one, client.websocket_connect("/") as two:
        for ws in (one, two):
            ws.send_text(json.dumps(INIT))
            assert ws.receive_json()["type"] == "init_ok"
        with client.websocket_connect("/") as three:
            three.send_text(json.dumps(INIT))
            error = three.receive_json()
            assert error["code"] == "busy" and "2 MT sessions" in error["message"]
            with pytest.raises(WebSocketDisconnect) as closed:
                three.receive_json()
            assert closed.value.code == 1013
    wait_for(lambda: service.sessions == 0)
    with client.websocket_connect("/") as again:
        again.send_text(json.dumps(INIT))
        assert again.receive_json()["type"] == "init_ok"


def test_busy_comes_at_once_on_connect_and_a_connection_waiting_to_init_holds_its_slot(
    client: TestClient, service: MTService
) -> None:
    # Two connections that have not sent `init` yet already hold both slots.
    with client.websocket_connect("/") as one, client.websocket_connect("/") as two:
        wait_for(lambda: service.sessions == 2)
        with client.websocket_connect("/") as three:
            error = three.receive_json()  # nothing sent: the refusal comes on connect
            assert error["type"] == "error" and error["code"] == "busy"
            # A client that writes its init first (as WhisperLiveKit's does) is then closed.
            three.send_text(json.dumps(INIT))
            with pytest.raises(WebSocketDisconnect) as closed:
                three.receive_json()
            assert closed.value.code == 1013
        for ws in (one, two):
            ws.send_text(json.dumps(INIT))
            assert ws.receive_json()["type"] == "init_ok"
    wait_for(lambda: service.sessions == 0)


def test_bad_frames_after_init_do_not_end_the_session(client: TestClient) -> None:
    with client.websocket_connect("/") as ws:
        ws.send_text(json.dumps(INIT))
        ws.receive_json()
        ws.send_text('{"type": "update", "seq": 4, "words": "oops"}')
        error = ws.receive_json()
        assert (error["code"], error["seq"]) == ("bad_protocol", 4)
        ws.send_bytes(b"\x00")
        assert "binary" in ws.receive_json()["message"]
        ws.send_text(update(5, ["Hello"], final=True))
        assert ws.receive_json()["committed_text"] == "Hallo"


def test_an_engine_failure_is_processing_failed_and_the_session_goes_on(
    client: TestClient, engine: GatedEngine
) -> None:
    engine.failures.append(RuntimeError("segfault in /opt/secret/kernel.cu"))
    with client.websocket_connect("/") as ws:
        ws.send_text(json.dumps(INIT))
        ws.receive_json()
        ws.send_text(update(1, ["Hello"]))
        error = ws.receive_json()
        assert (error["code"], error["seq"]) == ("processing_failed", 1)
        assert error["error_id"].startswith("err_") and error["error_id"] in error["message"]
        assert "secret" not in json.dumps(error)
        ws.send_text(update(2, ["Hello", "world,"], final=True))
        assert ws.receive_json()["committed_text"] == "Hallo Welt,"


def test_one_engine_call_at_a_time_round_robin_between_sessions(
    client: TestClient, engine: GatedEngine, service: MTService
) -> None:
    with client.websocket_connect("/") as a, client.websocket_connect("/") as b:
        for ws, source in ((a, "en"), (b, "en")):
            ws.send_text(json.dumps(INIT | {"source_lang": source}))
            ws.receive_json()
        engine.gate.clear()
        a.send_text(update(1, ["Hello"], final=True))
        wait_for(lambda: engine.running == 1)
        a.send_text(update(2, ["world,"], utterance=1, final=True))
        a.send_text(update(3, ["how"], utterance=2, final=True))
        b.send_text(update(1, ["the"], final=True))
        wait_for(lambda: isinstance(service.worker, SerialWorker) and service.worker.waiting == 1)
        engine.gate.set()
        a_texts = [a.receive_json()["committed_text"] for _ in range(3)]
        assert a_texts == ["Hallo", "Welt,", "wie"]
        assert b.receive_json()["committed_text"] == "die"
    keys = [request.cache_key for request in engine.requests if request.cache_key != WARM_UP_KEY]
    session_a, session_b = keys[0], keys[1]
    assert session_a is not None and session_b is not None
    assert session_a != session_b
    assert keys == [session_a, session_b, session_a, session_a]
    assert engine.most_running == 1
    wait_for(lambda: sorted(engine.forgotten) == sorted({WARM_UP_KEY, session_a, session_b}))


def test_a_session_bug_is_processing_failed_and_the_connection_goes_on(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = MTSession._plan

    def buggy(self: MTSession, update: Update) -> Any:
        if update.words and update.words[0].text == "boom":
            raise KeyError("internal state at /srv/dragoman")
        return plan(self, update)

    monkeypatch.setattr(MTSession, "_plan", buggy)
    with client.websocket_connect("/") as ws:
        ws.send_text(json.dumps(INIT))
        ws.receive_json()
        ws.send_text(update(1, ["boom"]))
        error = ws.receive_json()
        assert (error["code"], error["seq"]) == ("processing_failed", 1)
        assert "srv" not in error["message"] and error["error_id"] in error["message"]
        ws.send_text(update(2, ["Hello"], final=True))
        assert ws.receive_json()["committed_text"] == "Hallo"


def test_sessions_get_the_policy_of_the_loaded_models_presets() -> None:
    presets = policy_presets("qwen2.5-0.5b-instruct-gguf", "low_latency")
    assert {"low_latency", "balanced", "quality"} <= set(presets)
    assert presets["quality"].hold_back_target_units == 1
    assert presets["low_latency"].stop_at_frontier and not presets["quality"].stop_at_frontier
    # A user's own model keeps the preset the server was started with.
    assert set(policy_presets("/models/my-qwen", "balanced")) == {"balanced"}


async def test_an_unknown_default_preset_fails_at_start() -> None:
    service = make_service(FakeEngine(), default_preset="turbo")
    with pytest.raises(ConfigError):
        await service.start()
