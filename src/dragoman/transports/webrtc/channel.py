"""A call's `oai-events` data channel, and its caller's audio, as the driver's `Channel`.

The driver reads one stream of frames per connection. A call has two inputs, the data
channel's JSON events and the audio of the caller's track, so they meet here, in the
order they arrived: a text message is a frame as a WebSocket's is, and the track's
audio comes as `TrackAudio` frames (runs of it that the driver has not taken yet are
joined into one), which the call's codec turns into the session's input audio. A binary
data-channel message stays plain `bytes`, refused as a WebSocket's binary frame is.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from dragoman.errors import MessageTooBig
from dragoman.transports.adapters import Frame

#: The data channel's label, as OpenAI's clients open it.
EVENTS_LABEL = "oai-events"
#: Track audio kept while the session is not reading (before the data channel opens, or
#: while the loop is busy): at 24 kHz PCM16, 10 s. Older audio goes first past it.
MAX_PENDING_AUDIO_BYTES = 10 * 24_000 * 2


class TrackAudio(bytes):
    """PCM16 little-endian mono from the caller's audio track, at the session's input rate."""


class PlaybackCut(str):
    """The server's own `conversation.item.truncate` for an answer whose unplayed audio it
    flushed: the item, and the ms of its audio that were played. A `str`, so the driver
    takes it as it takes any frame, in order with the rest."""

    item_id: str
    audio_end_ms: int

    def __new__(cls, item_id: str, audio_end_ms: int) -> PlaybackCut:
        cut = super().__new__(cls, f"{item_id}@{audio_end_ms}")
        cut.item_id, cut.audio_end_ms = item_id, audio_end_ms
        return cut


class CallChannel:
    def __init__(self, max_bytes: int | None = None) -> None:
        #: The largest data-channel message taken (None: no limit of this server's).
        self.max_bytes = max_bytes
        self._items: deque[Frame] = deque()
        self._audio_bytes = 0
        self._ready = asyncio.Event()
        self._ended = False
        self._events: Any = None
        #: Called once, when the driver closes the channel (the call hangs up).
        self.on_close: Callable[[], None] = lambda: None
        #: Sideband connections (`sideband.py`): each is handed every frame sent, and None
        #: when the call ends.
        self._listeners: list[Callable[[str | None], None]] = []

    def listen(self, listener: Callable[[str | None], None]) -> Callable[[], None]:
        """Hand `listener` every server event from now on; returns how to stop."""
        if self._ended:
            listener(None)
            return lambda: None
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- what comes in ---------------------------------------------------------------------

    def attach(self, events: Any) -> None:
        """The peer's `oai-events` data channel (an aiortc `RTCDataChannel`)."""
        self._events = events
        events.on("message", self.message)
        events.on("close", self.end)

    def message(self, message: str | bytes) -> None:
        if not self._ended:
            self._items.append(message if isinstance(message, str) else bytes(message))
            self._ready.set()

    def audio(self, pcm: bytes) -> None:
        """The caller's track: the next PCM16 at the input rate."""
        if self._ended or not pcm:
            return
        if self._items and isinstance(self._items[-1], TrackAudio):
            self._items[-1] = TrackAudio(self._items[-1] + pcm)
        else:
            self._items.append(TrackAudio(pcm))
        self._audio_bytes += len(pcm)
        while self._audio_bytes > MAX_PENDING_AUDIO_BYTES:
            self._drop_oldest_audio()
        self._ready.set()

    def played(self, item_id: str, audio_end_ms: int) -> None:
        """An answer was cut off after `audio_end_ms` of it played (the playout's flush)."""
        if not self._ended:
            self._items.append(PlaybackCut(item_id, audio_end_ms))
            self._ready.set()

    def end(self) -> None:
        """The peer is gone (hang-up, a closed data channel, a failed connection)."""
        self._ended = True
        self._ready.set()
        for listener in self._listeners:
            listener(None)
        self._listeners.clear()

    @property
    def ended(self) -> bool:
        return self._ended

    def _drop_oldest_audio(self) -> None:
        for index, item in enumerate(self._items):
            if isinstance(item, TrackAudio):
                del self._items[index]
                self._audio_bytes -= len(item)
                return

    # -- the driver's Channel ----------------------------------------------------------------

    async def receive(self) -> Frame | None:
        while not self._items:
            if self._ended:
                return None
            self._ready.clear()
            await self._ready.wait()
        item = self._items.popleft()
        if isinstance(item, TrackAudio):
            self._audio_bytes -= len(item)
        elif self.max_bytes is not None and len(item) > self.max_bytes:
            raise MessageTooBig(f"The message is larger than this server's limit of {self.max_bytes} bytes.")
        return item

    async def send(self, frame: str) -> None:
        """Onto the data channel, dropped while it is not open (the peer cannot get it); and to
        each sideband connection."""
        events = self._events
        if events is not None and events.readyState == "open":
            events.send(frame)
        for listener in self._listeners:
            listener(frame)

    async def close(self, code: int) -> None:
        """The session ended: the call hangs up (a data channel has no close codes)."""
        self.end()
        self.on_close()
