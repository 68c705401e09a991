"""A Starlette WebSocket as the driver's `Channel`."""

from __future__ import annotations

from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.errors import MessageTooBig
from dragoman.transports.adapters import Frame


class WebSocketChannel:
    def __init__(self, websocket: WebSocket, max_bytes: int | None = None) -> None:
        self.websocket = websocket
        #: The largest message taken (None: the server's own limit only).
        self.max_bytes = max_bytes

    async def receive(self) -> Frame | None:
        try:
            message = await self.websocket.receive()
        except (WebSocketDisconnect, RuntimeError):  # RuntimeError: receive after the close
            return None
        if message["type"] == "websocket.disconnect":
            return None
        text = message.get("text")
        frame: Frame = text if text is not None else (message.get("bytes") or b"")
        # A str's length bounds its UTF-8 size from below: exact for the ASCII of JSON and base64.
        if self.max_bytes is not None and len(frame) > self.max_bytes:
            raise MessageTooBig(
                f"The message is larger than this server's limit of {self.max_bytes} bytes; "
                "send audio in smaller appends."
            )
        return frame

    async def send(self, frame: str) -> None:
        await self.websocket.send_text(frame)

    async def close(self, code: int) -> None:
        await self.websocket.close(code=code)
