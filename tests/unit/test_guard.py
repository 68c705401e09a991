"""API keys and the connection limit, in front of every endpoint but /health."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from fastapi import FastAPI, WebSocket
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from dragoman.transports.guard import AccessGuard, key_matches, presented_keys


def app(keys: tuple[str, ...] = ("sk-one", "sk-two"), max_connections: int = 8) -> FastAPI:
    served = FastAPI()

    @served.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @served.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": []}

    @served.websocket("/v1/realtime")
    async def realtime(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("hello")
        with contextlib.suppress(WebSocketDisconnect):
            await websocket.receive_text()

    served.add_middleware(AccessGuard, api_keys=keys, max_connections=max_connections)
    return served


def test_health_stays_open_and_other_routes_need_a_key() -> None:
    client = TestClient(app())
    assert client.get("/health").status_code == 200
    refused = client.get("/v1/models")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert client.get("/v1/models", headers={"Authorization": "Bearer sk-wrong"}).status_code == 401
    assert client.get("/v1/models", headers={"Authorization": "Bearer sk-two"}).status_code == 200


def test_a_websocket_without_a_key_is_refused_before_the_upgrade() -> None:
    client = TestClient(app())
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/realtime"):
        pass
    with client.websocket_connect("/v1/realtime", headers={"Authorization": "Bearer sk-one"}) as ws:
        assert ws.receive_text() == "hello"


def test_browsers_may_send_the_key_as_a_subprotocol() -> None:
    client = TestClient(app())
    protocols = ["realtime", "openai-insecure-api-key.sk-one", "openai-beta.realtime-v1"]
    with client.websocket_connect("/v1/realtime", subprotocols=protocols) as ws:
        assert ws.receive_text() == "hello"


def test_no_keys_means_an_open_server() -> None:
    client = TestClient(app(keys=()))
    assert client.get("/v1/models").status_code == 200


def test_connections_past_the_limit_are_refused() -> None:
    client = TestClient(app(keys=(), max_connections=1))
    with client.websocket_connect("/v1/realtime") as first:
        assert first.receive_text() == "hello"
        with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/realtime"):
            pass
    with client.websocket_connect("/v1/realtime") as again:
        assert again.receive_text() == "hello", "the slot is free once the first one closed"


def test_presented_keys_and_constant_time_matching() -> None:
    scope = {
        "type": "websocket",
        "headers": [
            (b"authorization", b"Bearer  sk-a "),
            (b"sec-websocket-protocol", b"realtime, openai-insecure-api-key.sk-b"),
        ],
    }
    assert presented_keys(scope) == ["sk-a", "sk-b"]
    assert key_matches(["sk-x", "sk-b"], ["sk-b"]) and not key_matches(["sk-x"], ["sk-b"])
    assert not key_matches([], ["sk-b"])
