"""Ephemeral client keys on a real `dragoman serve --api-key K`, minted and used by the openai SDK.

`client.realtime.client_secrets.create(...)` mints a key bound to a session config; a client
holding only that key connects once (the SDK with it as its api_key, or a browser-style
subprotocol), its session starts with the bound config, and the key then opens nothing,
nor does one past its expiry (OpenAI's shortest, 10 s).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets
from openai.types.realtime.client_secret_create_response import ClientSecretCreateResponse

from harness.realtime_helpers import first_event, refused_status, sdk_client, validate
from harness.server import Server, start, stop

pytestmark = pytest.mark.e2e

KEY = "sk-test-long-lived"
#: A config that differs from the server's defaults in every field it sets.
BOUND = {
    "type": "transcription",
    "audio": {
        "input": {
            "transcription": {"language": "de", "prompt": "Guten Tag."},
            "turn_detection": None,
        }
    },
}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "--api-key", KEY]
    running = start(args, tmp_path_factory.mktemp("secrets") / "dragoman.log", timeout=300.0)
    yield running
    stop(running)


async def test_a_minted_key_opens_one_session_that_starts_with_the_bound_config(guarded: Server) -> None:
    secret = await sdk_client(guarded, KEY).realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 600},
        session=BOUND,  # type: ignore[arg-type]
    )
    assert secret.value.startswith("ek_") and secret.session.type == "transcription"
    created = await first_event(guarded, secret.value)
    assert created["type"] == "session.created"
    transcription = created["session"]["audio"]["input"]["transcription"]
    assert (transcription["language"], transcription["prompt"]) == ("de", "Guten Tag.")
    assert created["session"]["audio"]["input"]["turn_detection"] is None
    assert await refused_status(guarded, secret.value) == 401, "a key opens one session"
    # The long-lived key still gets the server's defaults.
    plain = await first_event(guarded, KEY)
    assert plain["session"]["audio"]["input"]["transcription"]["language"] != "de"


async def test_a_key_past_its_expiry_is_refused(guarded: Server) -> None:
    secret = await sdk_client(guarded, KEY).realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 10},
        session=BOUND,  # type: ignore[arg-type]
    )
    await asyncio.sleep(11.5)
    assert await refused_status(guarded, secret.value) == 401


async def test_minting_needs_the_long_lived_key(guarded: Server) -> None:
    with pytest.raises(openai.AuthenticationError):
        await sdk_client(guarded, "sk-wrong").realtime.client_secrets.create(session=BOUND)  # type: ignore[arg-type]
    secret = await sdk_client(guarded, KEY).realtime.client_secrets.create(session=BOUND)  # type: ignore[arg-type]
    with pytest.raises(openai.AuthenticationError):
        await sdk_client(guarded, secret.value).realtime.client_secrets.create(session=BOUND)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        await sdk_client(guarded, KEY).realtime.client_secrets.create(expires_after={"seconds": 5})


async def test_a_browser_style_beta_client_sees_its_key_as_the_client_secret(guarded: Server) -> None:
    secret = await sdk_client(guarded, KEY).realtime.client_secrets.create(session=BOUND)  # type: ignore[arg-type]
    url = guarded.ws + "/v1/realtime?intent=transcription"
    protocols = ["realtime", f"openai-insecure-api-key.{secret.value}"]
    async with websockets.connect(
        url,
        subprotocols=protocols,  # type: ignore[arg-type]
        additional_headers={"OpenAI-Beta": "realtime=v1"},
    ) as ws:
        assert ws.subprotocol == "realtime", "a browser's WebSocket fails unless a protocol is picked"
        created = json.loads(await asyncio.wait_for(ws.recv(), 30))
    validate(created)
    assert created["type"] == "transcription_session.created"
    assert created["session"]["client_secret"] == {"value": secret.value, "expires_at": secret.expires_at}
    assert created["session"]["input_audio_transcription"]["language"] == "de"


async def test_an_agent_session_starts_with_the_bound_instructions_and_voice(server: Server) -> None:
    """On the shared server with every service and no keys: minting is open, the key still counts."""
    bound = {
        "type": "realtime",
        "instructions": "You are a pirate. Answer in one sentence.",
        "audio": {"output": {"voice": "joe"}},
    }
    open_client = sdk_client(server, "local")
    secret = await open_client.realtime.client_secrets.create(session=bound)  # type: ignore[arg-type]
    async with sdk_client(server, secret.value).realtime.connect(model="dragoman") as conn:
        created = json.loads(await asyncio.wait_for(conn.recv_bytes(), 30))
    validate(created)
    assert created["type"] == "session.created"
    assert created["session"]["instructions"] == bound["instructions"]
    assert created["session"]["audio"]["output"]["voice"] == "joe"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with sdk_client(server, secret.value).realtime.connect(model="dragoman") as conn:
            await conn.recv_bytes()
    assert refused.value.response.status_code == 401


def without_id(session: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in session.items() if key != "id"}


async def mint_raw(server: Server, key: str, session: dict[str, Any]) -> httpx.Response:
    """The endpoint's own answer, as JSON (the SDK's parse is lenient and would hide a bad shape)."""
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(
            server.http + "/v1/realtime/client_secrets",
            json={"session": session},
            headers={"Authorization": f"Bearer {key}"},
        )


async def test_a_transcription_key_is_answered_with_the_session_it_opens(guarded: Server) -> None:
    """OpenAI answers with the effective session: here `turn_detection: {}`, read as server VAD,
    comes back as the session's full server VAD, as that session's `session.created` says."""
    lenient = {"type": "transcription", "audio": {"input": {"turn_detection": {}}}}
    response = await mint_raw(guarded, KEY, lenient)
    assert response.status_code == 200, response.text
    answer = ClientSecretCreateResponse.model_validate(response.json())
    opens = response.json()["session"]
    assert opens["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    created = await first_event(guarded, answer.value)
    assert without_id(created["session"]) == without_id(opens)


async def test_a_realtime_key_is_answered_with_the_session_it_opens(server: Server) -> None:
    """The agent's session in the SDK's strict types (an echoed `{}` fails them), equal to the
    `session.created` of the connection the key opens; a voice the server lacks is refused
    when the key is minted."""
    lenient = {"type": "realtime", "instructions": "Be brief.", "audio": {"input": {"turn_detection": {}}}}
    response = await mint_raw(server, "local", lenient)
    assert response.status_code == 200, response.text
    answer = ClientSecretCreateResponse.model_validate(response.json())
    opens = response.json()["session"]
    assert opens["instructions"] == "Be brief." and opens["audio"]["output"]["voice"]
    async with sdk_client(server, answer.value).realtime.connect(model="dragoman") as conn:
        created = json.loads(await asyncio.wait_for(conn.recv_bytes(), 30))
    assert without_id(created["session"]) == without_id(opens)
    refused = await mint_raw(server, "local", {"type": "realtime", "audio": {"output": {"voice": "nobody"}}})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "session.audio.output.voice"
