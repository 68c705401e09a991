"""The soak's abusers (`python -m bench.soak --abuse`), only in the abuse windows of the `Schedule`.

* `flooder`: appends and commits `speed` × faster than real time;
* `oversizer`: one frame past `--max-message-bytes`, on the transcription and MT endpoints in turn;
* `idler`: connects, and then says nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from bench.audio import Audio
from bench.soak_clients import ASR_RATE, COMMITTED, COMPLETED, transcription_update
from bench.soak_connection import close_label, finish, open_ws, read_events, send_paced
from bench.soak_recorder import Recorder, Tally


async def flooder(url: str, rec: Recorder, index: int, utterances: Sequence[Audio], speed: float) -> None:
    """Appends in 1 s pieces `speed` × faster than real time, a commit after each recording."""
    role = "flooder"
    order = itertools.cycle(utterances)

    async def flood(ws: ClientConnection, tally: Tally, end: float) -> None:
        def handle(now: float, event: dict[str, Any]) -> None:
            if event["type"] == COMMITTED:
                tally.accepted += 1
            elif event["type"] == COMPLETED:
                tally.answered += 1

        reader = asyncio.create_task(read_events(ws, rec, role, handle))
        try:
            await ws.send(transcription_update())
            while time.monotonic() < end and not reader.done():
                await send_paced(ws, next(order), ASR_RATE, 1.0, speed=speed)
                await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
                tally.sent += 1
        finally:
            await finish(ws, reader)  # leaves with its items still queued: the server drops them

    while (window := await rec.schedule.next_abuse()) is not None:
        ws = await open_ws(url, rec, role)
        if ws is None:
            await asyncio.sleep(2)
            continue
        try:
            await flood(ws, rec.tally(role), window[1])
        except ConnectionClosed:
            rec.note(f"{role} #{index}: connection closed under it ({close_label(ws)})")


async def oversizer(realtime_url: str, mt_url: str, rec: Recorder, index: int, limit: int) -> None:
    """One frame past the limit, on the transcription and the MT endpoint in turn."""
    size = limit + 256 * 1024
    attempt = 0
    while (window := await rec.schedule.next_abuse()) is not None:
        _, end = window
        while time.monotonic() < end - 1:
            mt = attempt % 2 == 1
            attempt += 1
            role = "oversize (mt)" if mt else "oversize (transcription)"
            ws = await open_ws(mt_url if mt else realtime_url, rec, role)
            if ws is None:
                await asyncio.sleep(2)
                continue
            reader = asyncio.create_task(read_events(ws, rec, role, lambda now, event: None))
            try:
                if mt:
                    init = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}
                    await ws.send(json.dumps(init))
                    words = [["x" * size, None, None]]
                    frame = {"type": "update", "seq": 0, "utterance_id": 0, "words": words, "clock_ms": 0}
                else:
                    frame = {"type": "input_audio_buffer.append", "audio": "A" * size}
                await ws.send(json.dumps(frame))
                await asyncio.wait_for(asyncio.shield(reader), 30)
            except (ConnectionClosed, TimeoutError):
                pass
            finally:
                if not reader.done():
                    rec.note(f"oversize #{index}: the server kept the connection open for 30 s")
                await finish(ws, reader)
            await asyncio.sleep(3)


async def idler(realtime_url: str, mt_url: str, rec: Recorder, index: int) -> None:
    """Connects (every third on MT, and sends init) and then says nothing; the server should close it."""
    mt = index % 3 == 2
    role = "idle (mt)" if mt else "idle (transcription)"
    while (window := await rec.schedule.next_abuse()) is not None:
        _, end = window
        while time.monotonic() < end - 2:
            ws = await open_ws(mt_url if mt else realtime_url, rec, role)
            if ws is None:
                await asyncio.sleep(2)
                continue
            began = time.monotonic()
            reader = asyncio.create_task(read_events(ws, rec, role, lambda now, event: None))
            try:
                if mt:
                    init = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "it"}
                    await ws.send(json.dumps(init))
                await asyncio.wait_for(asyncio.shield(reader), max(0.1, end - time.monotonic()))
                rec.idle_closes[role].append(time.monotonic() - began)
            except (ConnectionClosed, TimeoutError):
                pass
            finally:
                await finish(ws, reader)
