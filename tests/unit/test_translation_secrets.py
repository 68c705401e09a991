"""`POST /v1/realtime/translations/client_secrets`: a key bound to a translation session, in
OpenAI's request and response shapes (`RealtimeTranslationClientSecretCreateResponse`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi import FastAPI, Request, WebSocket
from fastapi.testclient import TestClient
from openai.types.realtime import RealtimeTranslationClientSecretCreateResponse
from starlette.websockets import WebSocketDisconnect

from dragoman.sessions.translation.config import Languages
from dragoman.transports.client_secrets import ClientSecretStore, client_secrets_router
from dragoman.transports.guard import SPENT_MESSAGE, AccessGuard
from tests.unit.test_client_secrets import Clock

PATH = "/v1/realtime/translations/client_secrets"


def endpoint() -> tuple[TestClient, ClientSecretStore]:
    store = ClientSecretStore()
    app = FastAPI()
    app.include_router(client_secrets_router(store, translation_language="de"))
    return TestClient(app), store


def test_a_key_binds_the_translation_session() -> None:
    client, store = endpoint()
    body = {
        "session": {
            "model": "gpt-realtime-translate",
            "audio": {"output": {"language": "it"}, "input": {"noise_reduction": {"type": "near_field"}}},
        },
        "expires_after": {"anchor": "created_at", "seconds": 120},
    }
    answer = client.post(PATH, json=body)
    assert answer.status_code == 200, answer.text
    secret = RealtimeTranslationClientSecretCreateResponse.model_validate(answer.json())
    assert secret.value.startswith("ek_")
    session = secret.session
    assert session.type == "translation" and session.model == "gpt-realtime-translate"
    assert session.id.startswith("sess_") and session.expires_at > secret.expires_at - 120
    assert session.audio.output is not None and session.audio.output.language == "it"
    assert session.audio.input is not None and session.audio.input.noise_reduction is not None
    assert session.audio.input.noise_reduction.strength == 1.0
    bound = asyncio.run(store.redeem(secret.value))
    assert bound is not None and bound.session["type"] == "translation"
    assert bound.session["audio"]["output"] == {"language": "it"}


def test_a_language_the_interpreter_does_not_serve_is_refused_when_the_key_is_minted() -> None:
    app = FastAPI()
    languages = Languages.of(["en-de", "en-it", "de-en"])
    app.include_router(client_secrets_router(ClientSecretStore(), "de", lambda: languages))
    client = TestClient(app)
    session = {"model": "gpt-realtime-translate", "audio": {"output": {"language": "fr"}}}
    refused = client.post(PATH, json={"session": session})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "unsupported_language" and "en speech into de, it" in error["message"]
    session["audio"] = {"output": {"language": "it-IT"}}
    assert client.post(PATH, json={"session": session}).status_code == 200


def test_the_default_language_when_none_is_named() -> None:
    client, _ = endpoint()
    answer = client.post(PATH, json={"session": {"model": "dragoman-interpreter"}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["session"]["audio"]["output"] == {"language": "de"}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "session"),
        ({"session": {"audio": {"output": {"language": "de"}}}}, "session.model"),
        ({"session": {"model": "gpt-4o-realtime-preview"}}, "session.model"),
        ({"session": {"model": "gpt-realtime-translate", "type": "realtime"}}, "session.type"),
        (
            {
                "session": {
                    "model": "gpt-realtime-translate",
                    "audio": {"input": {"format": {"type": "audio/pcmu"}}},
                }
            },
            "session.audio.input.format",
        ),
        (
            {"session": {"model": "gpt-realtime-translate"}, "expires_after": {"seconds": 5}},
            "expires_after.seconds",
        ),
    ],
)
def test_bad_requests_are_refused(body: dict[str, Any], param: str) -> None:
    client, _ = endpoint()
    answer = client.post(PATH, json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param


# -- expiry ---------------------------------------------------------------------------------


def guarded(store: ClientSecretStore) -> TestClient:
    """The translation routes behind the access guard, each answering the session it was given."""
    app = FastAPI()
    app.include_router(client_secrets_router(store, translation_language="de"))

    @app.post("/v1/realtime/translations/calls")
    async def calls(request: Request) -> dict[str, Any]:
        return {"session": getattr(request.state, "session_config", None)}

    @app.websocket("/v1/realtime/translations")
    async def translations(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_json({"session": getattr(websocket.state, "session_config", None)})
        await websocket.close()

    app.add_middleware(AccessGuard, api_keys=(), max_connections=8, client_secrets=store)
    return TestClient(app)


def test_a_translation_key_opens_a_call_or_a_websocket_until_its_expires_at_only() -> None:
    clock = Clock()
    client = guarded(ClientSecretStore(clock=clock))
    body = {
        "session": {"model": "gpt-realtime-translate"},
        "expires_after": {"anchor": "created_at", "seconds": 10},
    }
    keys = [client.post(PATH, json=body).json() for _ in range(3)]
    assert all(key["expires_at"] == int(clock.now) + 10 for key in keys)
    clock.now += 9.5
    opened = client.post(
        "/v1/realtime/translations/calls", headers={"Authorization": f"Bearer {keys[0]['value']}"}
    )
    assert opened.status_code == 200 and opened.json()["session"]["type"] == "translation"
    clock.now += 1
    refused = client.post(
        "/v1/realtime/translations/calls", headers={"Authorization": f"Bearer {keys[1]['value']}"}
    )
    assert refused.status_code == 401
    assert refused.json() == {
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_api_key",
            "message": SPENT_MESSAGE,
            "param": None,
        }
    }
    headers = {"Authorization": f"Bearer {keys[2]['value']}"}
    with (
        pytest.raises(WebSocketDisconnect),
        client.websocket_connect("/v1/realtime/translations", headers=headers),
    ):
        pass
