"""The voice agent's end-to-end helpers: a session on `/v1/realtime` through the openai SDK,
spoken and typed turns, and the answer's audio judged by the server's own transcription.

The server's pool has one unit (`--num-pipelines` 1, the default), so `agent` waits for it
to be free before it connects.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import numpy as np
from openai import AsyncOpenAI
from openai.types.realtime import RealtimeSessionCreateRequestParam

from harness.realtime_helpers import Transcript, load_audio, read_until, stream
from harness.server import Server

RATE = 24_000
#: One utterance each, with no pause long enough to end a turn inside it.
QUESTION = "asr/en/en_ls-devclean_1272-128104-0000.wav"
INTERRUPTION = "asr/en/en_ls-testclean_6930-75918-0000.flac"
#: Instructions that make the answer long enough to be cut off.
STORYTELLER = "You tell long, detailed stories of at least ten sentences, however they are asked for."
#: Enough trailing silence for server VAD (500 ms) to end the turn.
PAUSE = np.zeros(int(1.2 * RATE), dtype=np.float32)
#: An application's instructions that say what its tool is for, as a framework's app would. The
#: flow tests need the call to happen; whether the model decides right under other
#: instructions is bench.agent_tools' measure (the 1.5B described the call for "What is the
#: weather in Paris right now?" under the server's own instructions with this one tool).
WEATHER_APP = "You are a weather assistant: use get_weather when the user asks about the weather somewhere."
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
}


def client(server: Server) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.http + "/v1", websocket_base_url=server.ws + "/v1", api_key="sk-local", max_retries=0
    )


def get(server: Server, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(server.http + path, timeout=10) as response:
        return dict(json.loads(response.read()))


async def pool_free(server: Server) -> None:
    """Wait (up to 30 s) until the last test's session has let its unit go."""
    for _ in range(300):
        if get(server, "/v1/pool")["idle"]:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the pool stayed busy: {get(server, '/v1/pool')}")


@asynccontextmanager
async def agent(server: Server, **session: Any) -> AsyncIterator[tuple[Any, Transcript]]:
    await pool_free(server)
    async with client(server).realtime.connect(model="dragoman-agent") as conn:
        log = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        if session:
            # The keyword arguments are the test's session fields, sent as given.
            update = cast(RealtimeSessionCreateRequestParam, {"type": "realtime", **session})
            await conn.session.update(session=update)
            await read_until(conn, log, lambda e: e["type"] in ("session.updated", "error"))
            assert not log.errors(), log.errors()
        yield conn, log


def kinds(log: Transcript) -> list[str]:
    return [e["type"] for e in log.events]


def response_done(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "response.done")


def answer_audio(log: Transcript, response_id: str) -> np.ndarray:
    pcm = b"".join(
        base64.b64decode(e["delta"])
        for e in log.of("response.output_audio.delta")
        if e["response_id"] == response_id
    )
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0


async def transcribe(server: Server, audio: np.ndarray) -> str:
    """The answer's audio through the server's own transcription endpoint."""
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        log = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        # One commit ends the answer's audio: server_vad (the session's default) goes off.
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        )
        await stream(conn, audio, RATE, piece_seconds=0.5)
        await conn.input_audio_buffer.commit()
        await read_until(
            conn, log, lambda e: e["type"] == "conversation.item.input_audio_transcription.completed"
        )
        return " ".join(e["transcript"] for e in log.completed)


def in_order(events: list[str], *expected: str) -> bool:
    """`expected` occur in `events` in this order (other events may come between)."""
    position = 0
    for kind in expected:
        try:
            position = events.index(kind, position) + 1
        except ValueError:
            return False
    return True


async def spoken_turn(conn: Any, file: str) -> None:
    await stream(conn, np.concatenate([load_audio(file, RATE), PAUSE]), RATE, piece_seconds=0.2)


async def ask_in_text(conn: Any, log: Transcript, text: str) -> dict[str, Any]:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    await conn.conversation.item.create(item=item)
    await conn.response.create(response={"output_modalities": ["text"]})
    await read_until(conn, log, response_done, limit=120)
    response: dict[str, Any] = log.of("response.done")[-1]["response"]
    return response
