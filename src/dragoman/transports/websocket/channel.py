"""A Starlette WebSocket as the driver's `Channel`."""

from __future__ import annotations

from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.transports.driver import Frame


class WebSocketChannel:
    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    async def receive(self) -> Frame | None:
        try:
            message = await self.websocket.receive()
        except (WebSocketDisconnect, RuntimeError):  # RuntimeError: receive after the close
            return None
        if message["type"] == "websocket.disconnect":
            return None
        text = message.get("text")
        return text if text is not None else (message.get("bytes") or b"")

    async def send(self, frame: str) -> None:
        await self.websocket.send_text(frame)

    async def close(self, code: int) -> None:
        await self.websocket.close(code=code)
