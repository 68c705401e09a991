"""The server-side buffer of a call's unplayed answer audio, played out 20 ms at a time.

Over WebRTC the server plays the answer out, so what TTS made faster than real time
waits here, and only here can it be dropped: "unplayed audio is buffered on the server,
and barge-in and cancellation must flush it on the server" (the reference agent's
table of the two transports). The buffer says what it does as OpenAI's WebRTC-only
events (`openai.types.realtime`):

- `output_audio_buffer.started`: "when the server begins streaming audio to the
  client", i.e. when a response's first frame is taken for the track;
- `output_audio_buffer.stopped`: "when the output audio buffer has been completely
  drained on the server, and no more audio is forthcoming", after `response.done`;
- `output_audio_buffer.cleared`: when it is flushed ("when the user has interrupted, or
  when the client has emitted the `output_audio_buffer.clear` event").

A flush also says how much of each answer was heard (`on_cut`: the item and the ms of
its audio played), so that its transcript keeps only that (`conversation.item.truncate`,
which a WebSocket client sends itself, the server does here for the call).

Each response's audio (PCM16 at the TTS rate) goes through its own stateful resampler
to 48 kHz. Sans-I/O: the outbound track calls `next_frame` on its 20 ms clock; a frame
is silence where nothing is queued.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from dragoman.audio.resample import StreamResampler
from dragoman.sessions.agent import events as agent

#: Opus's clock, the rate of both tracks.
TRACK_RATE = 48_000
#: One RTP packet's audio: 20 ms.
FRAME_SAMPLES = TRACK_RATE // 50

PlayoutEvent = agent.OutputAudioStarted | agent.OutputAudioStopped | agent.OutputAudioCleared


@dataclass
class _Segment:
    """One response's audio, in order: what is queued, and whether more may come."""

    response_id: str
    resampler: StreamResampler
    #: The assistant message the audio speaks.
    item_id: str | None = None
    #: Samples played out so far.
    played: int = 0
    chunks: deque[NDArray[np.float32]] = field(default_factory=deque)
    #: Samples at the front chunk already played.
    offset: int = 0
    finished: bool = False
    started: bool = False

    @property
    def empty(self) -> bool:
        return not self.chunks


class Playout:
    """Unplayed answer audio, by response, in the order it was made."""

    def __init__(
        self,
        notify: Callable[[PlayoutEvent], None],
        rate: int = TRACK_RATE,
        on_cut: Callable[[str, int], None] = lambda item_id, played_ms: None,
    ) -> None:
        self.rate = rate
        self._notify = notify
        self._on_cut = on_cut
        self._segments: deque[_Segment] = deque()
        #: Responses flushed: whatever of theirs still arrives is not played.
        self._dropped: set[str] = set()
        #: Seconds of audio played out (non-silent frames taken), for the call's log.
        self.played_seconds = 0.0

    def push(self, response_id: str, pcm: bytes, source_rate: int, item_id: str | None = None) -> None:
        """A response's next audio: PCM16 little-endian mono at `source_rate`, of `item_id`."""
        segment = self._segment(response_id, source_rate)
        if segment is None or not pcm:
            return
        segment.item_id = segment.item_id or item_id
        samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
        self._queue(segment, segment.resampler.process(samples))

    def finish(self, response_id: str) -> None:
        """The response made all its audio: once it is played out, `stopped` is said."""
        for segment in self._segments:
            if segment.response_id == response_id and not segment.finished:
                self._queue(segment, segment.resampler.drain())
                segment.finished = True
        self._drop_drained()

    def flush(self) -> None:
        """Drop every unplayed sample; `cleared` for a response whose playout had started, and
        how much of its item was heard."""
        segments, self._segments = self._segments, deque()
        for segment in segments:
            self._dropped.add(segment.response_id)
            if segment.started:
                self._notify(agent.OutputAudioCleared(segment.response_id))
                if segment.item_id is not None:
                    self._on_cut(segment.item_id, segment.played * 1000 // self.rate)

    @property
    def queued_seconds(self) -> float:
        samples = sum(sum(len(c) for c in s.chunks) - s.offset for s in self._segments)
        return samples / self.rate

    def next_frame(self) -> NDArray[np.int16]:
        """The next 20 ms for the track: queued audio, then silence."""
        frame = np.zeros(FRAME_SAMPLES, dtype=np.float32)
        filled = 0
        while filled < FRAME_SAMPLES and self._segments:
            segment = self._segments[0]
            if not segment.chunks:
                if not segment.finished:
                    break  # a response still being made is not played past: its next audio comes first
                self._drop_drained()
                continue
            if not segment.started:
                segment.started = True
                self._notify(agent.OutputAudioStarted(segment.response_id))
            chunk = segment.chunks[0]
            take = min(FRAME_SAMPLES - filled, len(chunk) - segment.offset)
            frame[filled : filled + take] = chunk[segment.offset : segment.offset + take]
            filled += take
            segment.offset += take
            segment.played += take
            if segment.offset == len(chunk):
                segment.chunks.popleft()
                segment.offset = 0
        if filled:
            self.played_seconds += filled / self.rate
        self._drop_drained()
        return np.asarray(np.clip(frame * 32768.0, -32768, 32767), dtype=np.int16)

    # -- inside ------------------------------------------------------------------------

    def _segment(self, response_id: str, source_rate: int) -> _Segment | None:
        if response_id in self._dropped:
            return None
        for segment in self._segments:
            if segment.response_id == response_id:
                return None if segment.finished else segment
        segment = _Segment(response_id, StreamResampler(source_rate, self.rate))
        self._segments.append(segment)
        return segment

    @staticmethod
    def _queue(segment: _Segment, samples: NDArray[np.float32]) -> None:
        if len(samples):
            segment.chunks.append(np.array(samples, dtype=np.float32))

    def _drop_drained(self) -> None:
        """A finished response with nothing left is over: `stopped` if it was heard."""
        while self._segments and self._segments[0].finished and self._segments[0].empty:
            segment = self._segments.popleft()
            if segment.started:
                self._notify(agent.OutputAudioStopped(segment.response_id))
