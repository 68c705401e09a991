"""The frames waiting to go out on one connection, with their own bound.

A slow or absent reader must not make the server buffer without end, nor block the engine
workers that produce its events: the driver puts frames here, and a sender task of its own
takes them out. Frames can carry a tag, so that what has not been sent yet of something
abandoned (the audio of a cancelled response) can be dropped at once.
"""

from __future__ import annotations

import asyncio
from collections import deque

#: Frames a client may leave unread before the connection is closed (about a minute of
#: 100 ms events); a client that reads nothing must not make the server buffer forever.
DEFAULT_SEND_LIMIT = 1024


class SendQueue:
    """Frames waiting for the sender: bounded, and clearable by tag."""

    def __init__(self, limit: int = DEFAULT_SEND_LIMIT) -> None:
        self.limit = limit
        self._frames: deque[tuple[str, str | None]] = deque()
        self._ready = asyncio.Event()
        self._closed = False
        self.overflowed = False

    def put(self, frame: str, tag: str | None = None) -> bool:
        """Queue a frame; False (and nothing queued) once the reader is `limit` frames behind."""
        if len(self._frames) >= self.limit:
            self.overflowed = True
            return False
        self._frames.append((frame, tag))
        self._ready.set()
        return True

    def clear(self, tag: str) -> int:
        """Drop every unsent frame tagged `tag` (e.g. the audio of a cancelled response)."""
        kept = deque(item for item in self._frames if item[1] != tag)
        dropped = len(self._frames) - len(kept)
        self._frames = kept
        return dropped

    def __len__(self) -> int:
        return len(self._frames)

    def close(self) -> None:
        """No more frames: `get` returns None once the queue is empty."""
        self._closed = True
        self._ready.set()

    async def get(self) -> str | None:
        while not self._frames:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._frames.popleft()[0]
