"""A call's audio: the caller's track into the session, the answer out on the server's.

Both tracks carry Opus at 48 kHz over RTP (aiortc encodes and decodes it). The caller's
decoded frames are mixed to mono and resampled, with one stateful resampler for the
call (`audio/resample.py`, soxr), to the session's input rate; the answer leaves the
call's `Playout` as 20 ms frames on the track's own real-time clock, silence while
nothing is queued.
"""

from __future__ import annotations

import asyncio
import fractions
import time
from collections.abc import Callable

import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame
from numpy.typing import NDArray

from dragoman.audio.pcm import float_to_pcm16
from dragoman.audio.resample import StreamResampler
from dragoman.logs import get_logger
from dragoman.transports.webrtc.playout import FRAME_SAMPLES, TRACK_RATE, Playout

log = get_logger(__name__)

_TIME_BASE = fractions.Fraction(1, TRACK_RATE)


class FrameClock:
    """Real-time pacing of 20 ms frames: `tick()` waits until the next frame is due and returns
    its timestamp (in samples). A loop stalled past 0.2 s starts the clock over rather than
    sending the frames it missed in a burst."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._pts = 0

    async def tick(self) -> int:
        now = time.monotonic()
        if self._start is None:
            self._start = now
            return 0
        self._pts += FRAME_SAMPLES
        due = self._start + self._pts / TRACK_RATE
        if due > now:
            await asyncio.sleep(due - now)
        elif now - due > 0.2:
            self._start, self._pts = now, 0
        return self._pts


class AnswerTrack(MediaStreamTrack):
    """The server's outbound audio track: the playout, paced at 20 ms a frame."""

    kind = "audio"

    def __init__(self, playout: Playout) -> None:
        super().__init__()
        self.playout = playout
        self._clock = FrameClock()

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        pts = await self._clock.tick()
        pcm = self.playout.next_frame()
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = TRACK_RATE
        frame.pts = pts
        frame.time_base = _TIME_BASE
        return frame


def mono_float(frame: AudioFrame) -> NDArray[np.float32]:
    """A decoded frame's samples, mixed to mono, as float32 in [-1, 1]."""
    data = frame.to_ndarray()
    channels = len(frame.layout.channels)
    # Planar formats hold a row per channel; packed ones interleave them in one row.
    samples = data.reshape(channels, -1).T if frame.format.is_planar else data.reshape(-1, channels)
    mono = samples.astype(np.float32).mean(axis=1)
    if data.dtype == np.int16:  # aiortc's decoders give s16; float formats are in [-1, 1] already
        mono /= 32768.0
    return np.asarray(mono, dtype=np.float32)


async def pump_caller_audio(track: MediaStreamTrack, rate: int, sink: Callable[[bytes], None]) -> None:
    """Until the track ends: its audio, resampled to `rate`, as PCM16 into `sink`."""
    resampler: StreamResampler | None = None
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        if not isinstance(frame, AudioFrame):
            continue
        if resampler is None or resampler.in_rate != frame.sample_rate:
            resampler = StreamResampler(frame.sample_rate, rate)
        out = resampler.process(mono_float(frame))
        if len(out):
            sink(float_to_pcm16(out))
