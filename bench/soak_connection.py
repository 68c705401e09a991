"""The soak clients' connection: open, read events, pace audio, wait, and reconnect.

Every client is a plain `websockets` client (the openai SDK's per-event pydantic parsing
would take CPU from the server it measures on a 2-core machine) that reconnects: it opens
a new session every `every` utterances, sentences or turns, until the run's end.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from bench.audio import Audio, b64
from bench.soak_recorder import Recorder, Tally

#: How long a client that leaves waits for the answers it is still owed.
DRAIN_S = 90.0


def close_label(ws: ClientConnection) -> str:
    """Who closed the connection, and with which code."""
    protocol = ws.protocol
    if protocol.close_rcvd is None:
        return "no close frame (1006)"
    code = protocol.close_rcvd.code
    return f"server closed {code}" if protocol.close_rcvd_then_sent else f"client closed ({code})"


async def open_ws(url: str, rec: Recorder, role: str) -> ClientConnection | None:
    try:
        # No keepalive pings: a busy server must not have the soak's sessions closed on it.
        ws = await connect(url, max_size=None, ping_interval=None, open_timeout=60, close_timeout=10)
    except (OSError, WebSocketException, TimeoutError) as exc:
        rec.refused[f"{role}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
        return None
    rec.connects[role] += 1
    return ws


async def read_events(
    ws: ClientConnection, rec: Recorder, role: str, handle: Callable[[float, dict[str, Any]], None]
) -> None:
    """Every event to `handle` (errors counted first) until the connection closes."""
    try:
        async for message in ws:
            event: dict[str, Any] = json.loads(message)
            if event.get("type") == "error":
                rec.error(role, event)
            handle(time.monotonic(), event)
    except ConnectionClosed:
        pass
    finally:
        rec.closes[role][close_label(ws)] += 1


async def finish(ws: ClientConnection, reader: asyncio.Task[None]) -> None:
    await ws.close()
    try:
        await asyncio.wait_for(reader, 15)
    except TimeoutError:
        reader.cancel()


#: The realtime API's append; a translation session's is `session.input_audio_buffer.append`.
APPEND = "input_audio_buffer.append"


def append(audio: Audio, kind: str = APPEND) -> str:
    return json.dumps({"type": kind, "audio": b64(audio)})


async def send_paced(
    ws: ClientConnection, audio: Audio, rate: int, piece_s: float, speed: float = 1.0, kind: str = APPEND
) -> float:
    """Append `audio` in `piece_s` pieces on an absolute schedule, `speed` × real time; when done."""
    step = int(rate * piece_s)
    began = time.monotonic()
    for n, start in enumerate(range(0, len(audio), step)):
        await asyncio.sleep(max(0.0, began + (n + 1) * piece_s / speed - time.monotonic()))
        await ws.send(append(audio[start : start + step], kind))
    return time.monotonic()


async def wait_for(event: asyncio.Event, reader: asyncio.Task[None], seconds: float) -> bool:
    """Until `event` is set (True), the connection closes or `seconds` pass (False)."""
    waiter = asyncio.ensure_future(event.wait())
    await asyncio.wait({waiter, reader}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    return event.is_set()


Session = Callable[[ClientConnection, Tally], Awaitable[None]]


async def reconnecting(url: str, rec: Recorder, role: str, index: int, session: Session) -> None:
    """Run `session` on a new connection, again and again, until the run is over."""
    while not rec.schedule.over():
        ws = await open_ws(url, rec, role)
        if ws is None:
            await asyncio.sleep(2)
            continue
        try:
            await session(ws, rec.tally(role))
        except ConnectionClosed:
            rec.note(f"{role} #{index}: connection closed under the client ({close_label(ws)})")
        finally:
            await ws.close()
