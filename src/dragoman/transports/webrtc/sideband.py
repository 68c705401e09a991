"""`/v1/realtime?call_id=…`: a server's WebSocket attached to a running WebRTC call (sideband).

OpenAI lets an application server attach to a call a browser placed over WebRTC, "to
monitor the session, update instructions, and respond to tool calls" while the browser
keeps the audio. The sideband connection speaks the call's own events: it is sent every
server event of the call's session from the moment it attaches, and what it sends goes into
that session as if it came on the call's data channel. It takes no pool unit (the call
holds one) and ends, with 1000, when the call does; the call goes on when it closes. A
sideband that stops reading is detached with 1008 once `SEND_LIMIT` events wait for
it, as a WebSocket session's client is: the call's audio deltas must not pile up without end.
A message past the server's size limit is refused to the sideband alone (an `error`, then
1009): through the call's channel it would end the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.errors import MessageTooBig
from dragoman.logs import get_logger
from dragoman.metrics import ERRORS
from dragoman.protocol.realtime.server_events import ErrorEvent, error_detail
from dragoman.sessions.base import CloseCode
from dragoman.transports.send_queue import DEFAULT_SEND_LIMIT, SendQueue
from dragoman.transports.websocket.realtime import refuse

log = get_logger(__name__)

#: Events a sideband may leave unread before it is detached (a WebSocket client's bound).
SEND_LIMIT = DEFAULT_SEND_LIMIT


async def serve_sideband(websocket: WebSocket, call_id: str) -> None:
    """Attach `websocket` (not yet accepted) to the running call `call_id`, or refuse it."""
    calls: Any = getattr(websocket.app.state, "calls", None)
    call = calls.running.get(call_id) if calls is not None else None
    if call is None or call.channel.ended:
        await refuse(websocket, "call_not_found", f"No call {call_id[:64]!r} is in progress.")
        return
    await websocket.accept()
    outgoing = SendQueue(SEND_LIMIT)

    def forward(frame: str | None) -> None:
        if frame is None or not outgoing.put(frame):
            outgoing.close()  # the call ended, or the sideband fell too far behind

    stop = call.channel.listen(forward)
    log.info("sideband attached", call=call_id)

    async def send() -> None:
        while (frame := await outgoing.get()) is not None:
            await websocket.send_text(frame)

    too_big = False

    async def receive() -> None:
        nonlocal too_big
        limit = call.channel.max_bytes
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            frame = text if text is not None else message.get("bytes") or b""
            if limit is not None and len(frame) > limit:
                error = MessageTooBig(f"The message is larger than this server's limit of {limit} bytes.")
                ERRORS.labels(error.code).inc()
                await websocket.send_text(json.dumps(ErrorEvent(error=error_detail(error, None)).wire()))
                too_big = True
                return
            call.channel.message(frame)

    tasks = [asyncio.create_task(send()), asyncio.create_task(receive())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task
        code = CloseCode.NORMAL
        if too_big:
            code = CloseCode.MESSAGE_TOO_BIG
        elif outgoing.overflowed:
            code = CloseCode.POLICY_VIOLATION
        if outgoing.overflowed:
            log.warning("sideband is not reading; detaching", call=call_id, queued=len(outgoing))
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close(code)
        log.info("sideband detached", call=call_id)
