"""The WebRTC sideband against a real `dragoman serve`: an aiortc caller places a call, and an
application server attaches to it with `/v1/realtime?call_id=…`, as OpenAI documents it ("to
monitor the session, update instructions, and respond to tool calls" while the browser keeps
the audio).

The sideband WebSocket must see the call's events, its `session.update` must change the
call's session, and the tool call the model makes on the call must be answered by the
sideband's `function_call_output`, whose result the caller then hears about on its own data
channel. The call holds the one pipeline unit; the sideband takes none. Every event on both
connections is validated against `openai.types.realtime`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets

pytest.importorskip("aiortc")

from harness.server import Server
from tests.e2e.agent_helpers import WEATHER, get
from tests.e2e.test_webrtc_e2e import check, connected, server  # noqa: F401 (the module's server)

pytestmark = pytest.mark.e2e

#: What only the sideband's tool result says: the answer can know it from nowhere else.
FORECAST = {"city": "Paris", "sky": "snowing", "celsius": -7}


class Sideband:
    """The application server's WebSocket on the call, its events validated and kept."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event))

    async def until(self, done: Any, limit: float = 120.0) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            while True:
                event: dict[str, Any] = json.loads(await self.ws.recv())
                check(event)
                self.events.append(event)
                if done(event):
                    return event

        return await asyncio.wait_for(read(), limit)

    def kinds(self) -> list[str]:
        return [e["type"] for e in self.events]


def units_busy(running: Server) -> int:
    return int(get(running, "/v1/pool")["busy"])


async def test_a_sideband_watches_the_call_updates_it_and_answers_its_tool_call(server: Server) -> None:  # noqa: F811
    caller = await connected(server)
    assert caller.location is not None
    call_id = caller.location.rsplit("/", 1)[-1]
    try:
        assert units_busy(server) == 1
        async with websockets.connect(f"{server.ws}/v1/realtime?call_id={call_id}") as ws:
            sideband = Sideband(ws)
            assert units_busy(server) == 1, "the sideband takes no pool unit"

            # The application server gives the call its tool; the caller's session changes.
            await sideband.send(
                {
                    "type": "session.update",
                    "session": {
                        "type": "realtime",
                        "instructions": "Answer in one short sentence. Use get_weather for any weather question.",
                        "tools": [WEATHER],
                        "tool_choice": "required",
                    },
                }
            )
            updated = await sideband.until(lambda e: e["type"] in ("session.updated", "error"))
            assert updated["type"] == "session.updated", updated
            on_call = await caller.until(lambda e: e["type"] in ("session.updated", "error"))
            assert on_call["type"] == "session.updated", on_call
            assert [t["name"] for t in on_call["session"]["tools"]] == ["get_weather"]

            # The caller asks; the model calls the tool, and the sideband sees the call.
            caller.send(
                {
                    "type": "conversation.item.create",
                    "item": {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "What is the weather in Paris now?"}],
                    },
                }
            )
            caller.send({"type": "response.create"})
            called = await sideband.until(lambda e: e["type"] == "response.function_call_arguments.done", 180)
            assert called["name"] == "get_weather"
            assert "paris" in json.loads(called["arguments"])["city"].lower()
            await sideband.until(lambda e: e["type"] == "response.done")

            # The sideband answers the call with a result the caller cannot know otherwise.
            await sideband.send(
                {
                    "type": "conversation.item.create",
                    "item": {
                        "type": "function_call_output",
                        "call_id": called["call_id"],
                        "output": json.dumps(FORECAST),
                    },
                }
            )
            await sideband.send({"type": "response.create", "response": {"tool_choice": "none"}})
            done = await caller.until(
                lambda e: (
                    e["type"] == "response.done"
                    and e["response"]["output"]
                    and e["response"]["output"][0]["type"] == "message"
                ),
                180,
            )
            assert done["response"]["status"] == "completed", done
            said = caller.of("response.output_audio_transcript.done")[-1]["transcript"].lower()
            assert "snow" in said or "-7" in said or "minus 7" in said or "minus seven" in said, said
            # The function_call_output the sideband created is an item of the call's conversation.
            added = [
                e["item"]
                for e in caller.of("conversation.item.added")
                if e["item"]["type"] == "function_call_output"
            ]
            assert [item["call_id"] for item in added] == [called["call_id"]]
            # The sideband saw the answer too: the call's events, from when it attached.
            await sideband.until(
                lambda e: e["type"] == "response.done" and e["response"]["id"] == done["response"]["id"]
            )
            assert "response.output_audio_transcript.done" in sideband.kinds()
            assert units_busy(server) == 1

            # The caller hangs up: the sideband is closed normally, and the unit is free.
            assert await caller.hang_up() == 204
            with pytest.raises(websockets.ConnectionClosedOK) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    finally:
        await caller.close()
    for _ in range(100):
        if units_busy(server) == 0:
            break
        await asyncio.sleep(0.1)
    assert units_busy(server) == 0


async def test_a_sideband_for_no_running_call_is_refused(server: Server) -> None:  # noqa: F811
    async with websockets.connect(f"{server.ws}/v1/realtime?call_id=rtc_nosuchcall") as ws:
        error = json.loads(await ws.recv())
        check(error)
        assert error["type"] == "error" and error["error"]["code"] == "call_not_found"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
