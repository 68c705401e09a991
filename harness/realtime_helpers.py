"""Driving `/v1/realtime` with the official openai SDK, and checking every server event."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import openai.types.beta.realtime as beta_types
import openai.types.realtime as ga_types
import pytest
import soundfile
import soxr
import websockets
from openai import AsyncOpenAI
from pydantic import TypeAdapter

from dragoman.audio.pcm import float_to_pcm16
from dragoman.protocol.realtime.server_events import SessionEvent, TranscriptionPartial
from dragoman.tools.eval_set import eval_dir
from dragoman.tools.eval_set import reference as reference
from dragoman.tools.wer import wer as wer
from harness.server import Server

EVAL = eval_dir()
GA_EVENT: TypeAdapter[Any] = TypeAdapter(ga_types.RealtimeServerEvent)


def load_audio(file: str, rate: int = 16_000, channel: int | None = None) -> np.ndarray:
    """An eval-set recording as float32 mono at `rate`: its `channel`, or the mean of all."""
    data, source_rate = soundfile.read(EVAL / file, dtype="float32", always_2d=True)
    mono = data[:, channel] if channel is not None else data.mean(axis=1)
    return np.asarray(
        soxr.resample(mono, source_rate, rate) if source_rate != rate else mono, dtype=np.float32
    )


def b64(audio: np.ndarray) -> str:
    return base64.b64encode(float_to_pcm16(audio)).decode()


def validate(event: dict[str, Any]) -> None:
    """Every server event must be well formed: OpenAI's GA types, or the beta/extension shapes."""
    kind = event["type"]
    if kind == "mstar.transcription.partial":
        TranscriptionPartial.model_validate(event)
    elif kind.startswith("transcription_session."):
        SessionEvent.model_validate(event)
        session = event["session"]
        # The fields the beta SDK's TranscriptionSession declares, in its shapes.
        assert (
            session["input_audio_format"] == "pcm16" or session["input_audio_format"]["type"] == "audio/pcm"
        )
        beta_types.transcription_session.InputAudioTranscription.model_validate(
            {**session["input_audio_transcription"], "model": None}
        )
        if session["turn_detection"] is not None:
            beta_types.transcription_session.TurnDetection.model_validate(session["turn_detection"])
        beta_types.transcription_session.ClientSecret.model_validate(session["client_secret"])
    else:
        GA_EVENT.validate_python(event)


@dataclass
class Transcript:
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def completed(self) -> list[dict[str, Any]]:
        return self.of("conversation.item.input_audio_transcription.completed")

    def deltas(self, item_id: str) -> str:
        return "".join(
            e["delta"]
            for e in self.of("conversation.item.input_audio_transcription.delta")
            if e["item_id"] == item_id
        )

    def errors(self) -> list[dict[str, Any]]:
        return [e["error"] for e in self.of("error")]


async def read_until(conn: Any, transcript: Transcript, done: Any, limit: float = 120.0) -> Transcript:
    """Read and validate events until `done(event)` is true."""

    async def loop() -> None:
        while True:
            event = json.loads(await conn.recv_bytes())
            validate(event)
            transcript.events.append(event)
            if done(event):
                return

    await asyncio.wait_for(loop(), limit)
    return transcript


async def stream(
    conn: Any, audio: np.ndarray, rate: int, piece_seconds: float = 0.1, pace: float = 0.0
) -> None:
    """Append `audio` in pieces; `pace` > 0 sleeps piece_seconds / pace between them."""
    step = int(rate * piece_seconds)
    for start in range(0, len(audio), step):
        await conn.input_audio_buffer.append(audio=b64(audio[start : start + step]))
        if pace:
            await asyncio.sleep(piece_seconds / pace)


# -- connecting ---------------------------------------------------------------------------


def sdk_client(server: Server, key: str) -> AsyncOpenAI:
    """The openai SDK on `server` with `key`, retrying nothing (a refusal is the test's answer)."""
    return AsyncOpenAI(
        base_url=server.http + "/v1", websocket_base_url=server.ws + "/v1", api_key=key, max_retries=0
    )


async def first_event(server: Server, key: str) -> dict[str, Any]:
    """The first event of a transcription session opened with `key`, validated."""
    async with sdk_client(server, key).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        event: dict[str, Any] = json.loads(await asyncio.wait_for(conn.recv_bytes(), 30))
    validate(event)
    return event


async def refused_status(server: Server, key: str) -> int:
    """The HTTP status with which `server` refuses a transcription session opened with `key`."""
    with pytest.raises(websockets.InvalidStatus) as refused:
        await first_event(server, key)
    return refused.value.response.status_code


# -- the voice agent ----------------------------------------------------------------------


async def answer_begins(conn: Any, log: Transcript, text: str) -> None:
    """Ask `text` in a text message and read until the spoken answer's audio has begun."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    await conn.conversation.item.create(item=item)
    await conn.response.create()
    await read_until(conn, log, lambda e: e["type"] == "response.output_audio.delta", limit=120)
