"""The WebRTC sideband (`/v1/realtime?call_id=…`, transports/webrtc/sideband.py): a server's
WebSocket attached to a running call, with no peer connection and no model.

The call is its real `CallChannel`, the one the call's session driver reads and writes: the
sideband must get every event the session sends from then on, and its own events must reach
the session as the data channel's do.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from fastapi import FastAPI, WebSocket
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from dragoman.transports.webrtc import sideband
from dragoman.transports.webrtc.channel import CallChannel
from dragoman.transports.webrtc.sideband import serve_sideband


def app_with_call(channel: CallChannel) -> FastAPI:
    app = FastAPI()
    app.state.calls = SimpleNamespace(running={"rtc_1": SimpleNamespace(channel=channel)})

    @app.websocket("/v1/realtime")
    async def realtime(websocket: WebSocket) -> None:
        await serve_sideband(websocket, websocket.query_params["call_id"])

    return app


def test_listeners_get_every_frame_sent_then_the_end() -> None:
    channel = CallChannel()
    got: list[str | None] = []
    stop = channel.listen(got.append)
    asyncio.run(channel.send('{"type": "response.created"}'))
    stop()
    asyncio.run(channel.send('{"type": "response.done"}'))
    assert got == ['{"type": "response.created"}']
    late: list[str | None] = []
    channel.listen(late.append)
    channel.end()
    assert late == [None], "a listener hears the end of the call"


def test_the_sideband_sees_the_calls_events_and_its_events_reach_the_session() -> None:
    channel = CallChannel()
    with (
        TestClient(app_with_call(channel)) as client,
        client.websocket_connect("/v1/realtime?call_id=rtc_1") as ws,
    ):
        assert client.portal is not None
        update = json.dumps({"type": "session.update", "session": {"type": "realtime", "instructions": "Hi"}})
        ws.send_text(update)
        received = client.portal.call(channel.receive)  # what the call's driver reads next
        assert received == update
        client.portal.call(channel.send, '{"type": "session.updated"}')
        assert json.loads(ws.receive_text()) == {"type": "session.updated"}
        channel.end()  # the call hangs up: the sideband is closed normally
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
        assert closed.value.code == 1000


def test_an_unknown_call_is_refused() -> None:
    with (
        TestClient(app_with_call(CallChannel())) as client,
        client.websocket_connect("/v1/realtime?call_id=rtc_nope") as ws,
    ):
        error = json.loads(ws.receive_text())
        assert error["type"] == "error" and error["error"]["code"] == "call_not_found"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
        assert closed.value.code == 1008


def test_a_sideband_that_falls_behind_is_detached_and_the_call_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sideband, "SEND_LIMIT", 3)
    channel = CallChannel()

    async def burst() -> None:
        # Sent with no await between them: the sideband's sender gets no turn to drain them.
        for n in range(5):
            await channel.send(f'{{"type": "response.output_audio.delta", "n": {n}}}')

    with (
        TestClient(app_with_call(channel)) as client,
        client.websocket_connect("/v1/realtime?call_id=rtc_1") as ws,
    ):
        assert client.portal is not None
        client.portal.call(burst)
        received = []
        with pytest.raises(WebSocketDisconnect) as closed:
            while True:
                received.append(json.loads(ws.receive_text())["n"])
        assert closed.value.code == 1008
        assert received == [0, 1, 2], "what was queued goes out, then the sideband is detached"
        assert not channel.ended, "the call goes on"


def test_a_message_past_the_limit_is_refused_to_the_sideband_alone() -> None:
    channel = CallChannel(max_bytes=100)
    with (
        TestClient(app_with_call(channel)) as client,
        client.websocket_connect("/v1/realtime?call_id=rtc_1") as ws,
    ):
        ws.send_text(json.dumps({"type": "session.update", "session": {"instructions": "x" * 200}}))
        error = json.loads(ws.receive_text())
        assert error["type"] == "error" and error["error"]["code"] == "message_too_big"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
        assert closed.value.code == 1009
        assert not channel.ended, "the call goes on"
        assert not channel._items, "nothing reached the call's session"
