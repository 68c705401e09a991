"""`POST /v1/realtime/translations/client_secrets`: a key bound to a translation session, in
OpenAI's request and response shapes (`RealtimeTranslationClientSecretCreateResponse`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from openai.types.realtime import RealtimeTranslationClientSecretCreateResponse

from dragoman.transports.client_secrets import ClientSecretStore, client_secrets_router

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
