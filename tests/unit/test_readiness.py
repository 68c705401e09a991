"""Ready means ready: /health and sessions while the engines load, warm up, or fail to."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from starlette.testclient import TestClient

from dragoman.config import Settings
from dragoman.engines.mt.base import WARM_UP_KEY, DraftMode
from dragoman.streaming.alignatt import AlignAttParams
from dragoman.transports.mt_app import create_mt_app
from dragoman.transports.services import MTService
from harness.mt_fakes import FakeEngine
from tests.unit.polling import wait_for

INIT = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}


class SlowWarmEngine(FakeEngine):
    """Its warm-up waits for `gate`, as a real model's first calls take seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def warm_up(self) -> None:
        assert self.gate.wait(10)
        super().warm_up()


def service_of(factory: Callable[[], FakeEngine]) -> MTService:
    return MTService(
        factory,
        default_preset="plain",
        max_sessions=2,
        max_utterance_words=50,
        presets={"plain": AlignAttParams(frontier_margin=0)},
    )


def test_health_is_503_and_sessions_are_refused_until_the_engine_is_warm() -> None:
    engine = SlowWarmEngine()
    with TestClient(create_mt_app(Settings(), service_of(lambda: engine))) as client:
        loading = client.get("/health")
        assert loading.status_code == 503
        assert loading.json()["status"] == "loading"
        with client.websocket_connect("/") as ws:
            refusal = ws.receive_json()
        assert refusal["type"] == "error" and refusal["code"] == "busy"
        assert "loading" in refusal["message"]
        assert engine.requests == []

        engine.gate.set()
        wait_for(lambda: client.get("/health").status_code == 200)
        health = client.get("/health").json()
        assert health["status"] == "ok"
        assert health["engine"]["name"] == "fake-lexicon"
        assert {"model", "cores", "simd"} <= set(health["cpu"])
        # The warm-up ran a streaming draft and a final pass, and let go of its cache.
        assert [(r.cache_key, r.mode) for r in engine.requests] == [
            (WARM_UP_KEY, DraftMode.PARTIAL),
            (WARM_UP_KEY, DraftMode.FINAL),
        ]
        assert engine.forgotten == [WARM_UP_KEY]
        with client.websocket_connect("/") as ws:
            ws.send_text(json.dumps(INIT))
            assert ws.receive_json()["type"] == "init_ok"


def test_a_failed_load_is_reported_with_an_error_id_and_stops_the_server() -> None:
    def broken() -> FakeEngine:
        raise RuntimeError("/srv/secret/model.bin: bad magic")

    app = create_mt_app(Settings(), service_of(broken))
    stopped = threading.Event()
    app.state.readiness.on_failure = stopped.set
    with TestClient(app) as client:
        assert stopped.wait(5)
        response = client.get("/health")
        assert response.status_code == 503
        body = response.json()
        assert body["status"] == "failed" and body["error"]["error_id"]
        assert "secret" not in response.text  # no server path or exception text
        with client.websocket_connect("/") as ws:
            refusal = ws.receive_json()
        assert refusal["code"] == "busy" and body["error"]["error_id"] in refusal["message"]


def test_a_drain_answers_503_draining_and_refuses_new_sessions() -> None:
    engine = FakeEngine()
    app = create_mt_app(Settings(), service_of(lambda: engine))
    with TestClient(app) as client:
        wait_for(lambda: client.get("/health").status_code == 200)
        with client.websocket_connect("/") as open_session:
            open_session.send_text(json.dumps(INIT))
            assert open_session.receive_json()["type"] == "init_ok"
            app.state.readiness.drain()  # what SIGTERM does (transports/serve.py)
            draining = client.get("/health")
            assert draining.status_code == 503 and draining.json()["status"] == "draining"
            with client.websocket_connect("/") as ws:
                refusal = ws.receive_json()
            assert refusal["type"] == "error" and refusal["code"] == "busy"
            assert "shutting down" in refusal["message"]
            update = {"type": "update", "seq": 0, "utterance_id": 0, "words": [["Hello", 0, 400]]}
            open_session.send_text(json.dumps({**update, "clock_ms": 400, "is_final": True}))
            assert open_session.receive_json()["type"] == "translation", "the open session runs on"
