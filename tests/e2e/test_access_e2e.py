"""Keys, limits and shutdown on a real `dragoman serve`, with the openai SDK and raw WebSockets."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families

from harness.server import Server, start, stop

pytestmark = pytest.mark.e2e

KEY = "sk-test-key"


def serve(tmp: Path, cache_dir: Path, *extra: str) -> Server:
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", *extra]
    return start(args, tmp / "dragoman.log", timeout=300.0)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    running = serve(
        tmp_path_factory.mktemp("guarded"),
        cache_dir,
        "--api-key",
        KEY,
        "--idle-timeout",
        "2",
        "--max-message-bytes",
        "65536",
    )
    yield running
    stop(running)


def realtime_url(server: Server) -> str:
    return server.ws + "/v1/realtime?intent=transcription"


def test_http_needs_the_key_and_health_does_not(guarded: Server) -> None:
    with urllib.request.urlopen(guarded.http + "/health", timeout=10) as answer:
        assert answer.status == 200
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(guarded.http + "/v1/models", timeout=10)
    assert refused.value.code == 401
    assert json.loads(refused.value.read())["error"]["code"] == "invalid_api_key"
    request = urllib.request.Request(guarded.http + "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.loads(answer.read())["object"] == "list"


async def test_the_sdk_with_the_key_connects_and_without_it_is_refused(guarded: Server) -> None:
    def client(key: str) -> AsyncOpenAI:
        return AsyncOpenAI(
            base_url=guarded.http + "/v1", websocket_base_url=guarded.ws + "/v1", api_key=key, max_retries=0
        )

    async with client(KEY).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        created = json.loads(await conn.recv_bytes())
        assert created["type"] == "session.created"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with client("sk-wrong").realtime.connect(
            model="whisper-base", extra_query={"intent": "transcription"}
        ) as conn:
            await conn.recv_bytes()
    assert refused.value.response.status_code == 401


async def test_a_browser_style_key_subprotocol_is_accepted(guarded: Server) -> None:
    protocols = ["realtime", f"openai-insecure-api-key.{KEY}"]
    async with websockets.connect(realtime_url(guarded), subprotocols=protocols) as ws:  # type: ignore[arg-type]
        assert json.loads(await ws.recv())["type"] == "session.created"


async def test_an_oversized_message_is_an_error_then_1009(guarded: Server) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with websockets.connect(realtime_url(guarded), additional_headers=headers) as ws:
        await ws.recv()  # session.created
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": "A" * 100_000}))
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["error"]["code"] == "message_too_big"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_a_silent_client_is_closed_after_the_idle_timeout(guarded: Server) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with websockets.connect(realtime_url(guarded), additional_headers=headers) as ws:
        await ws.recv()  # session.created
        error = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert error["error"]["code"] == "idle_timeout"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


async def test_sigterm_closes_sessions_with_1001_and_a_reason(tmp_path: Path, cache_dir: Path) -> None:
    server = serve(tmp_path, cache_dir)
    try:
        async with websockets.connect(realtime_url(server)) as ws:
            await ws.recv()  # session.created
            server.process.send_signal(signal.SIGTERM)
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert error["type"] == "error" and error["error"]["code"] == "server_shutting_down"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        # uvicorn re-raises the signal once it has shut down, as a process killed by it exits.
        assert await asyncio.to_thread(server.process.wait, 30) in (0, -signal.SIGTERM)
    finally:
        stop(server)


def test_metrics_are_prometheus_text_behind_the_key(guarded: Server) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(guarded.http + "/metrics", timeout=10)
    assert refused.value.code == 401
    request = urllib.request.Request(guarded.http + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert {"dragoman_sessions", "dragoman_connections", "dragoman_worker_waiting"} <= set(families)
    refusals = {
        s.labels["reason"]: s.value
        for s in families["dragoman_refusals"].samples
        if s.name.endswith("_total")
    }
    assert refusals.get("invalid_api_key", 0) >= 1, refusals
    assert "dragoman_engine_job_seconds" in families


def open_sessions(server: Server) -> dict[str, float]:
    request = urllib.request.Request(server.http + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    return {s.labels["service"]: s.value for s in families["dragoman_sessions"].samples}


async def test_large_appends_and_clients_that_vanish_mid_step_leave_the_server_serving_and_nothing_behind(
    guarded: Server,
) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    # 0.9 s of 24 kHz silence per append: 59 KB of base64 (under this server's 64 KiB limit),
    # handled off the event loop.
    audio = base64.b64encode(b"\x00\x00" * 22_000).decode()
    append = json.dumps({"type": "input_audio_buffer.append", "audio": audio})
    # The client commits its own turns (the session starts with server_vad, as OpenAI's do).
    push_to_talk = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
    for _ in range(3):
        # Appends and a commit (a step in flight), then gone without reading a thing.
        ws = await websockets.connect(realtime_url(guarded), additional_headers=headers)
        await ws.send(json.dumps({"type": "session.update", "session": push_to_talk}))
        for _ in range(4):
            await ws.send(append)
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        ws.transport.abort()
    # Another client is served meanwhile.
    async with websockets.connect(realtime_url(guarded), additional_headers=headers) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        for _ in range(3):
            await ws.send(append)
        await ws.send(json.dumps({"type": "session.update", "session": {"type": "transcription"}}))
        answer = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert answer["type"] == "session.updated", answer
    assert await asyncio.to_thread(health_status, guarded) == 200
    for _ in range(100):
        if (await asyncio.to_thread(open_sessions, guarded)).get("transcription") == 0:
            break
        await asyncio.sleep(0.1)
    sessions = await asyncio.to_thread(open_sessions, guarded)
    assert sessions.get("transcription") == 0, "every session that went away is gone"


def health_status(server: Server) -> int:
    with urllib.request.urlopen(server.http + "/health", timeout=10) as health:
        return int(health.status)
