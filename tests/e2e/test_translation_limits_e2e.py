"""The interpreter's limits and faults, as every other session has them, on a real `dragoman
serve` with keys, a short idle timeout and room for one translation session: a key is needed,
a second session past the limit is refused with 1013 (the SDK's retry code), a silent client is
closed, and /metrics counts the sessions, the audio in and out, and the lags. Every server event
is validated against the SDK's `RealtimeTranslationServerEvent`.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI

from harness.realtime_helpers import load_audio
from harness.server import Server, start, stop
from tests.e2e.test_translation_e2e import RATE, Heard, clip, read, stream, validate

pytestmark = pytest.mark.e2e

KEY = "sk-interpreter-limits"


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serve-limits")
    settings = folder / "dragoman.toml"
    settings.write_text("[interpreter]\nmax_sessions = 1\n", encoding="utf-8")
    args = ["serve", "--config", str(settings), "--cache-dir", str(cache_dir), "--api-key", KEY]
    running = start(
        [*args, "--idle-timeout", "3", "--services", "mt", "interpreter", "--preset", "low_latency"],
        folder / "log",
    )
    yield running
    stop(running)


def client(server: Server, key: str = KEY) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.http + "/v1", websocket_base_url=server.ws + "/v1", api_key=key, max_retries=0
    )


def metric(server: Server, name: str, **labels: str) -> float:
    """One sample of /metrics (0 when it has none)."""
    request = urllib.request.Request(server.http + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        sample, _, value = line.rpartition(" ")
        if sample == (f"{name}{{{want}}}" if want else name):
            return float(value)
    return 0.0


async def test_a_translation_session_needs_the_key(limited: Server) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with client(limited, "sk-wrong").realtime.translations.connect(
            model="gpt-realtime-translate"
        ) as conn:
            await conn.recv_bytes()
    assert refused.value.response.status_code == 401


async def test_past_the_limit_a_session_is_refused_for_later(limited: Server) -> None:
    async with client(limited).realtime.translations.connect(model="gpt-realtime-translate") as first:
        created = json.loads(await asyncio.wait_for(first.recv_bytes(), 30))
        validate(created)
        assert created["type"] == "session.created"
        async with client(limited).realtime.translations.connect(model="gpt-realtime-translate") as second:
            refusal = json.loads(await asyncio.wait_for(second.recv_bytes(), 30))
            validate(refusal)
            assert refusal["type"] == "error" and refusal["error"]["code"] == "session_limit_reached"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(second.recv_bytes(), 30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013


async def test_a_silent_client_is_closed_after_the_idle_timeout(limited: Server) -> None:
    async with client(limited).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        validate(json.loads(await asyncio.wait_for(conn.recv_bytes(), 30)))
        error = json.loads(await asyncio.wait_for(conn.recv_bytes(), 30))
        validate(error)
        assert error["type"] == "error" and error["error"]["code"] == "idle_timeout"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(conn.recv_bytes(), 30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


async def test_metrics_count_the_sessions_the_audio_and_the_lags(limited: Server) -> None:
    audio_in = metric(limited, "dragoman_translation_audio_seconds_total", direction="in")
    audio_out = metric(limited, "dragoman_translation_audio_seconds_total", direction="out")
    lags = metric(limited, "dragoman_translation_end_lag_seconds_count")
    row = clip(3)
    speech = np.concatenate([load_audio(row["file"], RATE), np.zeros(RATE, dtype=np.float32)])
    heard = Heard()
    async with client(limited).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        assert metric(limited, "dragoman_sessions", service="interpreter") == 1
        reader = asyncio.create_task(read(conn, heard, lambda e: e["type"] == "session.closed", 300))
        await stream(conn, speech)
        await conn.session.close()
        await reader
    assert heard.of("session.output_audio.delta")
    assert (
        metric(limited, "dragoman_translation_audio_seconds_total", direction="in")
        >= audio_in + len(speech) / RATE - 0.2
    )
    assert metric(limited, "dragoman_translation_audio_seconds_total", direction="out") > audio_out + 1.0
    assert metric(limited, "dragoman_translation_end_lag_seconds_count") > lags
    assert metric(limited, "dragoman_translation_first_text_seconds_count") > 0
