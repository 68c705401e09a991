"""Two `dragoman serve` front-ends behind a real nginx, sharing a client-secret key and a real
Redis, all on loopback: sessions through nginx land on both; an `ek_` key minted through the
balancer opens one session, wherever it lands; stopping one front-end closes its own clients
cleanly (an error event, then 1001) and leaves the other's sessions transcribing.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from tests.e2e.nginx_server import nginx
from tests.e2e.realtime_helpers import b64, load_audio, reference, validate, wer
from tests.e2e.redis_server import redis_server
from tests.e2e.server import Server, start, stop

pytestmark = pytest.mark.e2e

KEY = "sk-balanced"
EN = "asr/en/en_ls-testclean_1995-1837-0001.wav"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[tuple[str, list[Server]]]:
    folder = tmp_path_factory.mktemp("fleet")
    with redis_server(folder) as redis_url:
        args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "--api-key", KEY]
        args += [
            "--client-secret-key",
            secrets.token_urlsafe(32),
            "--redis-url",
            redis_url,
            "--drain-seconds",
            "3",
        ]
        fronts: list[Server] = []
        try:
            for name in ("a", "b"):
                fronts.append(start(args, folder / f"{name}.log", timeout=600.0))
            with nginx(folder, [front.port for front in fronts]) as url:
                yield url, fronts
        finally:
            for front in fronts:
                stop(front)


def sessions_on(front: Server) -> float:
    request = urllib.request.Request(front.http + "/metrics", headers=AUTH)
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    found = re.search(r'^dragoman_sessions\{service="transcription"\} (\S+)$', text, re.M)
    assert found, text[:2000]
    return float(found.group(1))


def mint(url: str) -> str:
    request = urllib.request.Request(
        url + "/v1/realtime/client_secrets",
        data=json.dumps({"session": {"type": "transcription"}}).encode(),
        headers=AUTH | {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["value"])


async def connect(url: str, key: str = KEY) -> ClientConnection:
    ws = await websockets.connect(
        url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription",
        additional_headers={"Authorization": f"Bearer {key}"},
    )
    created = await next_event(ws)
    assert created["type"] == "session.created", created
    return ws


async def next_event(ws: ClientConnection, limit: float = 120.0) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), limit))
    validate(event)
    return event


async def transcribe(ws: ClientConnection) -> str:
    """One utterance the client commits (server_vad, the session's default, off)."""
    push_to_talk = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
    await ws.send(json.dumps({"type": "session.update", "session": push_to_talk}))
    audio = load_audio(EN, 24_000)
    for at in range(0, len(audio), 4800):
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(audio[at : at + 4800])}))
    await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
    while True:
        event = await next_event(ws)
        if event["type"] == "conversation.item.input_audio_transcription.completed":
            return str(event["transcript"])


async def test_sessions_land_on_both_and_a_stopped_front_end_leaves_the_other_untouched(
    fleet: tuple[str, list[Server]],
) -> None:
    url, (first, second) = fleet
    clients = [await connect(url) for _ in range(4)]
    try:
        counts = await asyncio.to_thread(lambda: [sessions_on(first), sessions_on(second)])
        assert counts == [2.0, 2.0], counts

        # An ephemeral key minted through the balancer opens one session, on whichever replica.
        ephemeral = await asyncio.to_thread(mint, url)
        await (await connect(url, ephemeral)).close()
        for _ in range(2):  # both replicas refuse it now, whichever the balancer picks
            with pytest.raises(websockets.InvalidStatus) as refused:
                await connect(url, ephemeral)
            assert refused.value.response.status_code == 401

        # The first replica drains (3 s), closes its sessions and exits.
        first.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(first.process.wait, 60) == 0
        closed_codes = []
        for ws in clients:
            try:
                text = await asyncio.wait_for(transcribe(ws), 60)
                assert wer([reference(EN)], [text]) < 0.3, text
            except websockets.ConnectionClosed as closed:
                assert closed.rcvd is not None
                closed_codes.append(closed.rcvd.code)
        assert closed_codes == [1001, 1001], "the stopped replica's two clients closed cleanly"
        # New sessions through the balancer land on the replica that is left.
        survivor = await connect(url)
        assert wer([reference(EN)], [await transcribe(survivor)]) < 0.3
        await survivor.close()
    finally:
        for ws in clients:
            await ws.close()
