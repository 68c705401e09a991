"""The transcription session limit holds under concurrent handshakes.

The window the race needs (between the limit check and the count) is held open here: the
first handshake's WebSocket accept does not return until the test lets it, and a second
handshake arrives meanwhile. On loopback the window is too narrow to hit reliably.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

from dragoman.config import Settings
from dragoman.transports.app import create_app
from dragoman.transports.readiness import State
from dragoman.transports.services import TranscriptionService


class HeldHandshake:
    """One WebSocket connection to an ASGI app; `hold_accept` makes its accept wait for `release`."""

    def __init__(self, *, hold_accept: bool) -> None:
        self.hold_accept = hold_accept
        self.accepting = asyncio.Event()
        self.release = asyncio.Event()
        self.sent: list[MutableMapping[str, Any]] = []
        self._connected = False

    def scope(self) -> dict[str, Any]:
        return {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "scheme": "ws",
            "path": "/v1/realtime",
            "raw_path": b"/v1/realtime",
            "query_string": b"intent=transcription",
            "headers": [(b"host", b"127.0.0.1")],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "subprotocols": [],
            "extensions": {},
            "state": {},
        }

    async def receive(self) -> dict[str, Any]:
        if not self._connected:
            self._connected = True
            return {"type": "websocket.connect"}
        await asyncio.Event().wait()  # the client says nothing more
        raise AssertionError("unreachable")

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "websocket.accept" and self.hold_accept:
            self.accepting.set()
            await self.release.wait()

    def errors(self) -> list[str]:
        texts = [m["text"] for m in self.sent if m["type"] == "websocket.send"]
        return [json.loads(t)["error"]["code"] for t in texts]


async def test_a_handshake_in_flight_holds_the_last_slot() -> None:
    # A section as a dict, as a config file gives it: pydantic validates it into its model.
    settings = Settings(services=["transcription"], transcription={"max_sessions": 1})  # type: ignore[arg-type]
    app = create_app(settings)
    # The service without its engines: the limit is decided before a session would need them.
    service = TranscriptionService(settings.asr, settings.transcription, settings.cache_dir)
    app.state.runtime.transcription = service
    app.state.readiness.state = State.READY

    first = HeldHandshake(hold_accept=True)
    first_task = asyncio.create_task(app(first.scope(), first.receive, first.send))
    await asyncio.wait_for(first.accepting.wait(), 5)

    second = HeldHandshake(hold_accept=False)
    await asyncio.wait_for(app(second.scope(), second.receive, second.send), 5)
    assert second.errors() == ["session_limit_reached"]
    closes = [m for m in second.sent if m["type"] == "websocket.close"]
    assert closes and closes[0]["code"] == 1013
    assert service.sessions == 1

    # The first connection goes away while still in its handshake: its slot is freed.
    first_task.cancel()
    await asyncio.gather(first_task, return_exceptions=True)
    assert service.sessions == 0
