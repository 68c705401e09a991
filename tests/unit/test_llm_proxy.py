"""The LLM proxy's answers that need no upstream: a local backend's 501, a path it does not serve,
the 401 of a server with keys."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from dragoman.config import LLMSettings, Settings
from dragoman.transports.app import create_app
from dragoman.transports.llm_proxy import llm_proxy_router


def client(backend: str, base_url: str = "http://127.0.0.1:9/v1") -> TestClient:
    app = FastAPI()
    app.include_router(llm_proxy_router(LLMSettings(backend=backend, base_url=base_url, timeout_s=2)))
    return TestClient(app)


def test_a_local_backend_answers_501_with_the_reason() -> None:
    for path in ("/v1/chat/completions", "/v1/responses"):
        answer = client("llama-cpp").post(path, json={"model": "m", "messages": []})
        assert answer.status_code == 501
        error = answer.json()["error"]
        assert error["code"] == "llm_proxy_needs_remote_backend" and "llama-cpp" in error["message"]


def test_only_the_remote_backends_own_api_is_proxied() -> None:
    answer = client("chat-completions").post("/v1/responses", json={"model": "m", "input": "hi"})
    assert answer.status_code == 404
    assert "/v1/chat/completions" in answer.json()["error"]["message"]


def test_an_unreachable_upstream_is_a_502_without_its_address() -> None:
    answer = client("chat-completions", "http://127.0.0.1:9/v1").post(
        "/v1/chat/completions", json={"model": "m", "messages": []}
    )
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["code"] == "upstream_unavailable" and "127.0.0.1" not in error["message"]


def test_on_a_server_with_keys_the_proxy_needs_one() -> None:
    """The proxy is no hole in the server's keys: the real app's guard covers its routes too."""
    # Sections as dicts, as a config file gives them: pydantic validates each into its model.
    settings = Settings(
        api_keys=["sk-proxy"],
        agent={"enable_llm_proxy": True},  # type: ignore[arg-type]
        llm={"backend": "chat-completions", "base_url": "http://127.0.0.1:9/v1", "timeout_s": 2},  # type: ignore[arg-type]
    )
    # No lifespan: the engines are not loaded, and neither route needs them.
    app = TestClient(create_app(settings))
    body = {"model": "m", "messages": []}
    refused = app.post("/v1/chat/completions", json=body)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    wrong = app.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-wrong"})
    assert wrong.status_code == 401
    # With the key the request is passed on, and meets the (unreachable) upstream.
    passed = app.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-proxy"})
    assert passed.status_code == 502
