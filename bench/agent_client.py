"""A voice-agent client for the benchmarks: the English questions of ../shared/eval as spoken
audio, and one Realtime session over plain `websockets` (the openai SDK would parse every event
into pydantic models, CPU the server would lose on 2 cores) that streams them at real time and
keeps every server event with the time it arrived."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soxr
from websockets.asyncio.client import ClientConnection, connect

from bench.audio import RATE, Audio, EvalRow, eval_rows, load
from dragoman.audio.pcm import float_to_pcm16
from dragoman.audio.vad import SileroModel, SileroVAD

#: The client's input rate: GA's default `audio/pcm` is 24 kHz PCM16.
WIRE_RATE = 24_000
PIECE_S = 0.1
#: Recordings longer than this are left out (a question, not a speech).
LONGEST_S = 15.0


# -- speech ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Utterance:
    name: str
    #: At the wire rate.
    audio: Audio
    #: Where Silero hears the speech begin and end, in seconds from the recording's start.
    onset_s: float
    end_s: float


def speech_bounds(vad: SileroModel, audio: Audio) -> tuple[float, float]:
    """The first and last 16 kHz windows Silero scores as speech (threshold 0.5), in seconds."""
    stream = SileroVAD(vad)
    width = stream.window_samples
    speech = [
        begin
        for begin in range(0, len(audio) - width + 1, width)
        if stream(audio[begin : begin + width]) >= 0.5
    ]
    if not speech:
        return 0.0, len(audio) / RATE
    return speech[0] / RATE, (speech[-1] + width) / RATE


def utterance(row: EvalRow, vad: SileroModel) -> Utterance:
    audio = load(row)
    onset, end = speech_bounds(vad, audio)
    wire = np.ascontiguousarray(soxr.resample(audio, RATE, WIRE_RATE), dtype=np.float32)
    return Utterance(row.name, wire, onset, end)


def questions(vad: SileroModel) -> list[Utterance]:
    """Every English recording of asr.tsv up to LONGEST_S (FLEURS among them), shortest first."""
    rows = sorted((r for r in eval_rows("en") if r.duration <= LONGEST_S), key=lambda r: r.duration)
    return [utterance(row, vad) for row in rows]


def silence(seconds: float) -> Audio:
    return np.zeros(int(seconds * WIRE_RATE), dtype=np.float32)


# -- the client -----------------------------------------------------------------------------


@dataclass
class Client:
    """One agent session: every server event with the wall-clock time it was received."""

    ws: ClientConnection
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    session_id: str = ""
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.ws:
            at = time.time()
            self.events.append((at, json.loads(frame)))
            self._arrived.set()

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event))

    async def until(self, condition: Callable[[], bool], limit: float) -> None:
        """Wait until `condition()` holds, checked at each event and every 0.2 s."""
        deadline = time.monotonic() + limit
        while not condition():
            if self._reader is not None and self._reader.done():
                raise ConnectionError(f"the server closed the session: {self.errors()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"not done in {limit:g} s; last events: {self.kinds()[-5:]}")
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.2))

    async def wait_for(
        self, done: Callable[[dict[str, Any]], bool], limit: float, start: int = 0
    ) -> tuple[float, dict[str, Any]]:
        """The first event from index `start` on for which `done` is true (waiting for it)."""
        found: list[tuple[float, dict[str, Any]]] = []

        def seen() -> bool:
            found[:] = [(at, e) for at, e in self.events[start:] if done(e)][:1]
            return bool(found)

        await self.until(seen, limit)
        return found[0]

    def of(self, kind: str) -> list[tuple[float, dict[str, Any]]]:
        return [(at, e) for at, e in self.events if e["type"] == kind]

    def kinds(self) -> list[str]:
        return [e["type"] for _, e in self.events]

    def errors(self) -> list[dict[str, Any]]:
        return [e["error"] for _, e in self.of("error")]

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


async def open_client(ws_url: str, session: dict[str, Any] | None = None) -> Client:
    # No keepalive pings: a busy server must not have the benchmark's sessions closed on it.
    ws = await connect(
        ws_url + "/v1/realtime?model=dragoman-agent", max_size=None, ping_interval=None, open_timeout=60
    )
    client = Client(ws)
    client.start()
    _, created = await client.wait_for(lambda e: e["type"] == "session.created", 30)
    client.session_id = str(created["session"]["id"])
    if session:
        mark = len(client.events)
        await client.send({"type": "session.update", "session": {"type": "realtime", **session}})
        _, event = await client.wait_for(lambda e: e["type"] in ("session.updated", "error"), 30, mark)
        if event["type"] == "error":
            raise RuntimeError(f"session.update refused: {event['error']}")
    return client


async def speak(client: Client, audio: Audio, began: float, stop: asyncio.Event, tail_s: float) -> None:
    """Append `audio` and then silence on a real-time schedule from `began` (epoch seconds).

    Each 100 ms piece is sent once it has been "recorded": piece k at began + (k + 1) * 0.1 s.
    Silence goes on until `stop` is set or `tail_s` of it was sent.
    """
    step = int(PIECE_S * WIRE_RATE)
    pieces = [audio[i : i + step] for i in range(0, len(audio), step)]
    quiet = silence(PIECE_S)
    k = 0
    while True:
        if k < len(pieces):
            piece = pieces[k]
        elif stop.is_set() or (k - len(pieces)) * PIECE_S >= tail_s:
            return
        else:
            piece = quiet
        k += 1
        await asyncio.sleep(max(0.0, began + k * PIECE_S - time.time()))
        payload = base64.b64encode(float_to_pcm16(piece)).decode("ascii")
        await client.send({"type": "input_audio_buffer.append", "audio": payload})


def get(http: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(http + path, timeout=10) as response:
        return dict(json.loads(response.read()))


async def pool_idle(http: str) -> None:
    """Wait until no session holds a pipeline unit (the last one has drained)."""
    for _ in range(600):
        if (await asyncio.to_thread(get, http, "/v1/pool"))["busy"] == 0:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the pool stayed busy: {get(http, '/v1/pool')}")


def stage_lines(log_path: Path) -> dict[str, list[dict[str, Any]]]:
    """The server's `agent stages` lines, by session, in the order logged."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        if '"agent stages"' not in line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        out.setdefault(record["session"], []).append(record)
    return out
