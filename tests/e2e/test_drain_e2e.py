"""Graceful drain on a real `dragoman serve`: what a rolling update needs.

On SIGTERM, /health answers 503 `draining` (the load balancer takes the replica out), a new
session is refused as while the server loads (`server_not_ready`, 1013: try again later), the
open session runs on, transcribing what it is sent, and at `--drain-seconds` it is told the
server is going away and closed with 1001; then the process exits 0.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from harness.realtime_helpers import b64, load_audio, reference, validate, wer
from harness.server import Server, start, stop

pytestmark = pytest.mark.e2e

DRAIN_S = 30.0
EN = "asr/en/en_ls-testclean_1995-1837-0001.wav"


def health(server: Server) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(server.http + "/health", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_while_healthy(server: Server, limit: float = 10.0) -> None:
    """Until /health stops answering 200 (the signal is handled between two ticks)."""
    deadline = time.monotonic() + limit
    while health(server)[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.05)


async def next_event(ws: ClientConnection, limit: float = 120.0) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), limit))
    validate(event)
    return event


async def test_sigterm_drains_then_closes_open_sessions_with_1001(tmp_path: Path, cache_dir: Path) -> None:
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription"]
    server = start([*args, "--drain-seconds", str(DRAIN_S)], tmp_path / "dragoman.log", timeout=600.0)
    url = server.ws + "/v1/realtime?intent=transcription"
    try:
        async with websockets.connect(url) as ws:
            assert (await next_event(ws))["type"] == "session.created"
            server.process.send_signal(signal.SIGTERM)
            began = time.monotonic()
            wait_while_healthy(server)
            status, body = health(server)
            assert (status, body["status"]) == (503, "draining"), body

            async with websockets.connect(url) as refused:
                error = await next_event(refused)
                assert error["type"] == "error" and error["error"]["code"] == "server_not_ready"
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await refused.recv()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013

            # The open session runs on: it transcribes a whole utterance sent after the SIGTERM,
            # which the client commits (no server_vad, the session's default).
            push_to_talk = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
            await ws.send(json.dumps({"type": "session.update", "session": push_to_talk}))
            audio = load_audio(EN, 24_000)
            for start_at in range(0, len(audio), 2400):
                await ws.send(
                    json.dumps(
                        {"type": "input_audio_buffer.append", "audio": b64(audio[start_at : start_at + 2400])}
                    )
                )
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            events: list[dict[str, Any]] = []
            while not events or events[-1]["type"] != "conversation.item.input_audio_transcription.completed":
                events.append(await next_event(ws))
            assert time.monotonic() - began < DRAIN_S, "the drain must outlast the transcription"
            assert wer([reference(EN)], [events[-1]["transcript"]]) < 0.3
            assert server.process.poll() is None, "the server waits for its open session"

            # At the deadline: an error event says why, then 1001 (going away).
            last = await next_event(ws, limit=DRAIN_S + 30)
            assert last["type"] == "error" and last["error"]["code"] == "server_shutting_down", last
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
            assert time.monotonic() - began >= DRAIN_S - 1
        assert server.process.wait(timeout=30) == 0
    finally:
        stop(server)


async def test_a_drain_with_no_open_session_ends_at_once(tmp_path: Path, cache_dir: Path) -> None:
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "--drain-seconds", "600"]
    server = start(args, tmp_path / "dragoman.log", timeout=600.0)
    try:
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 0
    finally:
        stop(server)
