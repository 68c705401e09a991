"""What a transport adapter gives the driver (`driver.py`): a `Channel` that moves one
connection's frames, and a `Codec` that turns them into a session's events and back.

A WebSocket route (`websocket/`) and a WebRTC call (`webrtc/`) each implement both; the
driver runs every session the same way over either.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from dragoman.errors import ClientError, ServerError

ClientEventT = TypeVar("ClientEventT")
ServerEventT = TypeVar("ServerEventT")

#: One message as the transport carries it: JSON text, or binary.
Frame = str | bytes


class Channel(Protocol):
    """One connection's frames: a WebSocket, or a WebRTC data channel."""

    async def receive(self) -> Frame | None:
        """The next frame, or None once the peer has closed; raises MessageTooBig for a frame
        past the channel's size limit."""

    async def send(self, frame: str) -> None: ...

    async def close(self, code: int) -> None: ...


class Codec(Protocol[ClientEventT, ServerEventT]):
    """A protocol's wire format for one connection (it may keep state, such as a name generation)."""

    def parse(self, frame: Frame) -> ClientEventT:
        """The session event of a frame; raises `ClientError` for a frame it refuses."""

    def write(self, event: ServerEventT) -> str | None:
        """The frame of `event`, or None when the client's protocol has no such event."""

    def refusal(self, error: ClientError, frame: Frame) -> ServerEventT:
        """The error event answering a refused frame."""

    def failure(self, error: ServerError, event: ClientEventT | None) -> ServerEventT:
        """The error event telling the client of a server fault (while handling `event`)."""
