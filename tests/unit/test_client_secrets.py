"""Ephemeral client keys: the signed tokens and their store, `POST /v1/realtime/client_secrets`, and the guard that
redeems them once, before they expire, and hands the route their bound session."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI, Request, WebSocket
from fastapi.testclient import TestClient
from openai.types.realtime.client_secret_create_response import ClientSecretCreateResponse
from starlette.websockets import WebSocketDisconnect

from dragoman.errors import ConfigError, InvalidValue
from dragoman.protocol.realtime.generation import Generation
from dragoman.protocol.realtime.server_events import NO_CLIENT_SECRET, wire_event
from dragoman.sessions.speech.config import SessionConfig
from dragoman.sessions.transcription import events as out
from dragoman.transports.client_secrets import DEFAULT_TTL_S, ClientSecretStore, client_secrets_router
from dragoman.transports.guard import AccessGuard
from dragoman.transports.secret_tokens import MAX_TOKEN_CHARS, PREFIX, TokenSigner, signing_key
from dragoman.transports.spent_keys import LocalSpentKeys
from tests.unit.realtime_sdk import validate


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


SESSION = {"type": "realtime", "instructions": "Answer in one word."}

# -- the store ------------------------------------------------------------------------


def test_a_key_is_redeemed_once() -> None:
    store = ClientSecretStore()
    secret = store.mint(SESSION, 60)
    assert secret.value.startswith(PREFIX) and len(secret.value) > 40
    assert store.peek(secret.value) == secret, "peeking spends nothing"
    assert asyncio.run(store.redeem(secret.value)) == secret
    assert asyncio.run(store.redeem(secret.value)) is None
    assert store.peek(secret.value) is None


def test_keys_are_random_and_unknown_ones_open_nothing() -> None:
    store = ClientSecretStore()
    values = {store.mint(SESSION).value for _ in range(50)}
    assert len(values) == 50
    assert asyncio.run(store.redeem(PREFIX + "guessed")) is None
    assert store.peek(PREFIX + "guessed.AAAA") is None


def test_a_key_expires_and_spent_records_are_pruned() -> None:
    clock = Clock()
    store = ClientSecretStore(clock=clock)
    secret = store.mint(SESSION, 10)
    assert secret.expires_at == int(clock.now) + 10
    clock.now += 9
    assert store.peek(secret.value) is not None
    assert asyncio.run(store.redeem(secret.value)) is not None
    assert isinstance(store.spent, LocalSpentKeys) and len(store.spent) == 1
    clock.now += 1
    assert asyncio.run(store.redeem(secret.value)) is None
    assert len(store.spent) == 0, "a record outlives its key by nothing"


def test_a_replica_with_the_shared_key_accepts_a_key_another_minted() -> None:
    shared = secrets.token_bytes(32)
    minted = ClientSecretStore(shared).mint(SESSION, 60)
    other = ClientSecretStore(shared)
    assert other.peek(minted.value) == minted
    assert ClientSecretStore().peek(minted.value) is None, "a replica with its own key refuses it"


def test_a_key_cannot_be_forged_or_altered() -> None:
    store = ClientSecretStore()
    value = store.mint(SESSION, 60).value
    payload, tag = value[len(PREFIX) :].split(".")
    assert store.peek(f"{PREFIX}{payload}.{tag[:-2]}AA") is None
    other, _ = TokenSigner(secrets.token_bytes(32)).sign({"type": "realtime", "instructions": "x"}, 2**40)
    other_payload = other[len(PREFIX) :].split(".")[0]
    assert store.peek(f"{PREFIX}{other_payload}.{tag}") is None, "a session swapped under the tag"
    assert store.peek(value[:-1]) is None and store.peek(value + "A") is None
    assert store.peek(value.replace(".", "")) is None


def test_a_session_too_large_for_a_key_is_refused() -> None:
    huge = {"type": "realtime", "instructions": secrets.token_hex(MAX_TOKEN_CHARS)}
    with pytest.raises(InvalidValue) as raised:
        ClientSecretStore().mint(huge)
    assert raised.value.param == "session"


def test_a_short_shared_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        signing_key("too short")
    assert signing_key("k" * 32) == b"k" * 32
    assert signing_key(None) != signing_key(None), "a random key per process when none is set"


# -- the endpoint and the guard -----------------------------------------------------------


def app(
    keys: tuple[str, ...] = ("sk-long",),
    store: ClientSecretStore | None = None,
    effective: Callable[[dict[str, Any]], dict[str, Any] | None] = lambda session: None,
) -> FastAPI:
    """The endpoint behind the guard; by default with no service to tell the session a key opens."""
    served = FastAPI()
    store = ClientSecretStore() if store is None else store
    served.include_router(client_secrets_router(store, effective=effective))

    @served.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": []}

    @served.post("/v1/realtime/calls")
    async def calls(request: Request) -> dict[str, Any]:
        return {"session": getattr(request.state, "session_config", None)}

    @served.websocket("/v1/realtime")
    async def realtime(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_json(
            {
                "session": getattr(websocket.state, "session_config", None),
                "client_secret": getattr(websocket.state, "client_secret", None),
            }
        )
        with contextlib.suppress(WebSocketDisconnect):
            await websocket.receive_text()

    served.add_middleware(AccessGuard, api_keys=keys, max_connections=8, client_secrets=store)
    return served


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def mint(client: TestClient, body: dict[str, Any], key: str = "sk-long") -> dict[str, Any]:
    response = client.post("/v1/realtime/client_secrets", json=body, headers=bearer(key))
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_minting_answers_the_sdks_response_type() -> None:
    client = TestClient(app())
    data = mint(client, {"expires_after": {"anchor": "created_at", "seconds": 30}, "session": SESSION})
    parsed = ClientSecretCreateResponse.model_validate(data)
    assert parsed.value.startswith(PREFIX)
    assert parsed.session.type == "realtime" and parsed.session.object == "realtime.session"
    assert parsed.session.instructions == "Answer in one word."
    transcription = mint(client, {"session": {"type": "transcription"}})
    parsed = ClientSecretCreateResponse.model_validate(transcription)
    assert parsed.session.type == "transcription"


def test_the_answer_is_the_session_the_key_opens_where_the_service_can_tell() -> None:
    """The service's own session object is the answer (defaults filled in, not the request
    echoed), and a config its session refuses is refused before any key exists."""
    asked: list[dict[str, Any]] = []

    def effective(session: dict[str, Any]) -> dict[str, Any] | None:
        asked.append(session)
        if session.get("instructions") == "refuse":
            raise InvalidValue("Unknown voice 'nobody'.", param="session.audio.output.voice")
        return {"id": "sess_opened", "object": "realtime.session", "type": "realtime", "instructions": "full"}

    client = TestClient(app(effective=effective))
    data = mint(client, {"session": SESSION})
    assert asked == [SESSION]
    assert data["session"] == {
        "id": "sess_opened",
        "object": "realtime.session",
        "type": "realtime",
        "instructions": "full",
    }
    response = client.post(
        "/v1/realtime/client_secrets",
        json={"session": {"type": "realtime", "instructions": "refuse"}},
        headers=bearer("sk-long"),
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "session.audio.output.voice"


def test_minting_defaults_to_a_realtime_session_for_ten_minutes() -> None:
    clock = Clock()
    client = TestClient(app(store=ClientSecretStore(clock=clock)))
    data = client.post("/v1/realtime/client_secrets", headers=bearer("sk-long")).json()
    assert data["expires_at"] == int(clock.now) + DEFAULT_TTL_S
    assert data["session"]["type"] == "realtime"


def test_minting_needs_a_long_lived_key_on_a_server_with_keys() -> None:
    client = TestClient(app())
    refused = client.post("/v1/realtime/client_secrets", json={})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    ephemeral = mint(client, {})["value"]
    assert client.post("/v1/realtime/client_secrets", json={}, headers=bearer(ephemeral)).status_code == 401
    assert client.get("/v1/models", headers=bearer(ephemeral)).status_code == 401


def test_an_open_server_mints_for_anyone() -> None:
    client = TestClient(app(keys=()))
    assert client.post("/v1/realtime/client_secrets", json={}).status_code == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"expires_after": {"seconds": 5}}, "expires_after.seconds"),
        ({"expires_after": {"seconds": 7201}}, "expires_after.seconds"),
        ({"expires_after": {"anchor": "now", "seconds": 60}}, "expires_after.anchor"),
        ({"session": {"type": "video"}}, "session.type"),
        ({"session": {"type": "realtime", "instructions": 7}}, "session.instructions"),
        ({"session": []}, "session"),
        ({"session": {"type": []}}, "session.type"),  # found by the fuzzer: it raised TypeError
    ],
)
def test_a_bad_request_is_refused_with_openais_error(body: dict[str, Any], param: str) -> None:
    response = TestClient(app()).post("/v1/realtime/client_secrets", json=body, headers=bearer("sk-long"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error


def test_bad_json_is_refused() -> None:
    client = TestClient(app())
    response = client.post("/v1/realtime/client_secrets", content=b"{nope", headers=bearer("sk-long"))
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_does_not_have_is_refused(literal: str) -> None:
    # Found by the fuzzer: Python read it in a field the session ignores, the answer echoed
    # the session, and the echo could not be written as JSON (a 500).
    client = TestClient(app())
    body = '{"session": {"type": "realtime", "extra": [' + literal + "]}}"
    response = client.post("/v1/realtime/client_secrets", content=body, headers=bearer("sk-long"))
    assert response.status_code == 400
    assert f"{literal} is not a JSON number" in response.json()["error"]["message"]


def test_an_ephemeral_key_opens_one_websocket_with_its_session() -> None:
    client = TestClient(app())
    data = mint(client, {"session": SESSION})
    key = data["value"]
    with client.websocket_connect("/v1/realtime", headers=bearer(key)) as ws:
        state = ws.receive_json()
    assert state["session"] == SESSION
    assert state["client_secret"] == {"value": key, "expires_at": data["expires_at"]}
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/realtime", headers=bearer(key)):
        pass


def test_a_browser_sends_the_ephemeral_key_as_a_subprotocol_and_gets_realtime_back() -> None:
    client = TestClient(app())
    key = mint(client, {"session": SESSION})["value"]
    protocols = ["realtime", f"openai-insecure-api-key.{key}"]
    with client.websocket_connect("/v1/realtime", subprotocols=protocols) as ws:
        assert ws.accepted_subprotocol == "realtime"
        assert ws.receive_json()["session"] == SESSION


def test_an_expired_ephemeral_key_is_refused() -> None:
    clock = Clock()
    client = TestClient(app(store=ClientSecretStore(clock=clock)))
    key = mint(client, {"expires_after": {"seconds": 10}})["value"]
    clock.now += 11
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/realtime", headers=bearer(key)):
        pass
    assert client.post("/v1/realtime/calls", headers=bearer(key)).status_code == 401


def test_a_webrtc_call_spends_the_key_and_gets_its_session() -> None:
    client = TestClient(app())
    key = mint(client, {"session": SESSION})["value"]
    answered = client.post("/v1/realtime/calls", headers=bearer(key))
    assert answered.status_code == 200 and answered.json()["session"] == SESSION
    again = client.post("/v1/realtime/calls", headers=bearer(key))
    assert again.status_code == 401 and again.json()["error"]["code"] == "invalid_api_key"


def test_a_stale_ephemeral_key_is_refused_on_an_open_server_too() -> None:
    client = TestClient(app(keys=()))
    key = mint(client, {"session": SESSION})["value"]
    with client.websocket_connect("/v1/realtime", headers=bearer(key)) as ws:
        assert ws.receive_json()["session"] == SESSION
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/realtime", headers=bearer(key)):
        pass
    with client.websocket_connect("/v1/realtime") as ws:
        assert ws.receive_json()["session"] is None, "an open server still takes a keyless client"


# -- beta's session object carries a client_secret -----------------------------------------


@pytest.mark.parametrize("created", [True, False])
def test_beta_transcription_session_events_carry_a_client_secret(created: bool) -> None:
    event = out.SessionConfigured(created, "sess_1", SessionConfig(), "whisper-base", 30.0)
    plain = wire_event(event, Generation.BETA)
    assert plain["session"]["client_secret"] == NO_CLIENT_SECRET
    validate(plain, Generation.BETA)
    secret = {"value": "ek_abc", "expires_at": 1_000_600}
    keyed = wire_event(event, Generation.BETA, secret)
    assert keyed["session"]["client_secret"] == secret
    validate(keyed, Generation.BETA)
    assert "client_secret" not in wire_event(event, Generation.GA, secret)["session"]
