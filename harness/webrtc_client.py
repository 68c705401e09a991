"""An aiortc caller for `POST /v1/realtime/calls`: a microphone track that speaks recordings
at real time, the answer's track recorded frame by frame, and the `oai-events` channel.

The end-to-end tests (test_webrtc_e2e) and the benchmark (bench/webrtc_latency.py) call
the server with it, as a browser would: it creates the `oai-events` data channel and a
send-and-receive audio transceiver, offers, and applies the server's answer.
"""

from __future__ import annotations

import asyncio
import fractions
import json
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame

from dragoman.transports.webrtc.tracks import FrameClock, mono_float
from harness.server import Server, start

RATE = 48_000
FRAME = RATE // 50
_TIME_BASE = fractions.Fraction(1, RATE)


def start_for_calls(args: Sequence[str], log: Path) -> Server:
    """`dragoman serve` with no STUN server, as on a machine with no route out: loopback needs none."""
    previous = os.environ.get("DRAGOMAN_ICE_SERVERS")
    os.environ["DRAGOMAN_ICE_SERVERS"] = "[]"
    try:
        return start(args, log, timeout=600.0)
    finally:
        if previous is None:
            os.environ.pop("DRAGOMAN_ICE_SERVERS", None)
        else:
            os.environ["DRAGOMAN_ICE_SERVERS"] = previous


class Microphone(MediaStreamTrack):
    """What the caller says: queued audio (48 kHz float32) at real time, silence between."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue: deque[np.ndarray] = deque()
        self._clock = FrameClock()
        #: `time.monotonic()` when the last queued sample was sent (None: nothing said yet).
        self.said_at: float | None = None
        #: `time.monotonic()` when each `say`'s first sample was sent.
        self.began: list[float] = []
        self._head_begun = False
        self._quiet = asyncio.Event()
        self._quiet.set()

    def say(self, audio: np.ndarray) -> None:
        self._queue.append(np.asarray(audio, dtype=np.float32))
        self._quiet.clear()

    async def quiet(self) -> None:
        """Until everything queued has been sent."""
        await self._quiet.wait()

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        pts = await self._clock.tick()
        frame = np.zeros(FRAME, dtype=np.float32)
        filled = 0
        while filled < FRAME and self._queue:
            head = self._queue[0]
            if not self._head_begun:
                self._head_begun = True
                self.began.append(time.monotonic() + filled / RATE)
            take = min(FRAME - filled, len(head))
            frame[filled : filled + take] = head[:take]
            filled += take
            if take == len(head):
                self._queue.popleft()
                self._head_begun = False
            else:
                self._queue[0] = head[take:]
            if not self._queue:
                self.said_at = time.monotonic()
                self._quiet.set()
        pcm = np.clip(frame * 32768.0, -32768, 32767).astype(np.int16)
        out = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        out.sample_rate, out.pts, out.time_base = RATE, pts, _TIME_BASE
        return out


@dataclass
class Heard:
    """A frame of the answer's track as it arrived."""

    at: float
    samples: np.ndarray

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.samples)))) if len(self.samples) else 0.0


@dataclass
class Caller:
    http: str
    api_key: str | None = None
    validate: Callable[[dict[str, Any]], None] = lambda event: None
    peer: RTCPeerConnection = field(default_factory=RTCPeerConnection)
    microphone: Microphone = field(default_factory=Microphone)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: Arrival times (`time.monotonic()`) of `events`.
    times: list[float] = field(default_factory=list)
    heard: list[Heard] = field(default_factory=list)
    location: str | None = None
    channel: Any = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _cursor: int = 0

    def offer_tracks(self) -> None:
        self.channel = self.peer.createDataChannel("oai-events")
        self.channel.on("message", self._message)
        self.peer.addTransceiver(self.microphone, direction="sendrecv")

        @self.peer.on("track")
        def on_track(track: Any) -> None:
            self._tasks.append(asyncio.ensure_future(self._listen(track)))

    async def offer(self) -> str:
        self.offer_tracks()
        await self.peer.setLocalDescription(await self.peer.createOffer())
        return str(self.peer.localDescription.sdp)

    async def call(self, path: str = "/v1/realtime/calls", **post: Any) -> httpx.Response:
        """Offer, POST it to `path` (as `application/sdp`), and apply the answer when it is a 201."""
        sdp = await self.offer()
        headers = {"Content-Type": "application/sdp", **self._auth()}
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(self.http + path, content=sdp, headers=headers, **post)
        if response.status_code == 201:
            await self.answer(response.text, response.headers["location"])
        return response

    async def answer(self, sdp: str, location: str) -> None:
        self.location = location
        await self.peer.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))

    async def hang_up(self) -> int:
        assert self.location is not None
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.delete(self.http + self.location, headers=self._auth())
        return response.status_code

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.microphone.stop()
        await self.peer.close()

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    # -- events ------------------------------------------------------------------------

    def send(self, event: dict[str, Any]) -> None:
        self.channel.send(json.dumps(event))

    def _message(self, message: str | bytes) -> None:
        event = json.loads(message)
        self.validate(event)
        self.events.append(event)
        self.times.append(time.monotonic())
        self._arrived.set()

    async def until(self, done: Callable[[dict[str, Any]], bool], limit: float = 120.0) -> dict[str, Any]:
        """The next event that is `done`, reading on from where the last `until` stopped
        (as one reads a WebSocket's events)."""

        async def wait() -> dict[str, Any]:
            while True:
                while self._cursor < len(self.events):
                    event = self.events[self._cursor]
                    self._cursor += 1
                    if done(event):
                        return event
                self._arrived.clear()
                await self._arrived.wait()

        return await asyncio.wait_for(wait(), limit)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def kinds(self) -> list[str]:
        return [e["type"] for e in self.events]

    def time_of(self, event: dict[str, Any]) -> float:
        return self.times[next(i for i, e in enumerate(self.events) if e is event)]

    # -- the answer's audio ----------------------------------------------------------------

    async def _listen(self, track: Any) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            samples = mono_float(frame)
            if frame.sample_rate != RATE:
                continue  # Opus only: never another rate
            self.heard.append(Heard(time.monotonic(), samples))

    async def track_ended(self, limit: float) -> None:
        """Until the server's track has ended (the call hung up), at most `limit` seconds."""
        await asyncio.wait_for(asyncio.gather(*self._tasks), limit)

    def audio_between(self, start: float, end: float = float("inf")) -> np.ndarray:
        chunks = [h.samples for h in self.heard if start <= h.at < end]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)

    def first_sound(self, after: float, threshold: float = 0.01) -> float | None:
        """When the first frame louder than `threshold` (RMS) arrived after `after`."""
        return next((h.at for h in self.heard if h.at > after and h.rms > threshold), None)
