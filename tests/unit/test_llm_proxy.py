"""The LLM proxy's answers that need no upstream: a local backend's 501, a path it does not serve."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from dragoman.config import LLMSettings
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
