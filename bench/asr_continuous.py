"""Continuous speech with `server_vad`: concurrent sessions whose items the server cuts.

Each session streams a minute or so of real recordings played one after another, with a
short pause between them, at real-time pace in 100 ms appends, and never commits: the
server's VAD ends each item at a pause (its own, or one inside a recording) and commits
it. After the speech, a second of silence lets the VAD end the last item. A final's lag
runs from the server's `input_audio_buffer.committed` to the item's `.completed`; a
partial's lag is measured on the session's timeline from its item's `speech_started`
(`audio_start_ms`). WER is over the session's transcripts joined, against the joined
references.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection

from bench.asr_load import (
    COMMITTED,
    COMPLETED,
    FAILED,
    PIECE_SECONDS,
    LoadResult,
    StreamSettings,
    Trace,
    drive,
    open_session,
)
from bench.audio import RATE, Audio, Clip, SessionInput, b64

#: Silence between two recordings of a session: longer than server_vad's 500 ms.
GAP_SECONDS = 0.8
#: Silence after the speech, so that the VAD ends the last item.
TAIL_SECONDS = 1.2
#: How long a session waits for its last finals once its audio is sent.
DRAIN_TIMEOUT_S = 120.0


def continuous_inputs(clips: list[Clip], count: int, seconds: float) -> list[SessionInput]:
    """`count` sessions of at least `seconds` of speech each: whole recordings with a human
    reference, one after another with `GAP_SECONDS` between; each session starts at a
    different recording."""
    pool = [c for c in sorted(clips, key=lambda c: c.row.name) if c.row.reference.strip()]
    if not pool:
        raise ValueError("no recording with a reference")
    gap = np.zeros(round(GAP_SECONDS * RATE), dtype=np.float32)
    inputs = []
    for i in range(count):
        parts: list[Audio] = []
        references: list[str] = []
        k = i
        while sum(len(p) for p in parts) < seconds * RATE:
            clip = pool[k % len(pool)]
            parts += [np.concatenate(clip.parts), gap]
            references.append(clip.row.reference)
            k += 1
        names = f"{pool[i % len(pool)].row.name}+{k - i - 1}"
        inputs.append(SessionInput(names, np.concatenate(parts), " ".join(references)))
    return inputs


async def vad_session(
    ws: ClientConnection, audio: Audio, trace: Trace, start_at: float, errors: list[dict[str, Any]]
) -> None:
    """Stream `audio` and a silent tail at real-time pace; wait until every committed item is done."""
    trace.server_commits = True
    tail = np.zeros(round(TAIL_SECONDS * RATE), dtype=np.float32)
    audio = np.concatenate([audio, tail])
    step = int(PIECE_SECONDS * RATE)
    committed: set[str] = set()
    finished: set[str] = set()
    settled = asyncio.Event()

    async def read() -> None:
        async for message in ws:
            event: dict[str, Any] = json.loads(message)
            trace.received.append((time.monotonic(), event))
            kind = event["type"]
            if kind == "error":
                errors.append(event["error"])
            elif kind == COMMITTED:
                committed.add(event["item_id"])
            elif kind in (COMPLETED, FAILED):
                finished.add(event["item_id"])
            settled.set()

    reader = asyncio.create_task(read())
    try:
        count = 0
        for index in range(0, len(audio), step):
            await asyncio.sleep(max(0.0, start_at + (index // step + 1) * PIECE_SECONDS - time.monotonic()))
            await ws.send(
                json.dumps({"type": "input_audio_buffer.append", "audio": b64(audio[index : index + step])})
            )
            count = min(len(audio), count + step)
            trace.sent.append((count, time.monotonic()))
        trace.committed = time.monotonic()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while not committed or not committed <= finished:
            settled.clear()
            await asyncio.wait_for(settled.wait(), timeout=max(0.1, deadline - time.monotonic()))
    finally:
        reader.cancel()
        await ws.close()


async def run_vad_load(
    ws_base: str, inputs: list[SessionInput], settings: StreamSettings, max_batch: int | None = None
) -> LoadResult:
    """Every input as one concurrent server_vad session; their traces."""
    url = ws_base + "/v1/realtime?intent=transcription"
    connections = await asyncio.gather(*(open_session(url, settings) for _ in inputs))
    return await drive(connections, inputs, settings, vad_session, max_batch)
