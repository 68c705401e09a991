"""The wire format of a call: the agent's GA events, with WebRTC's three differences.

From the reference agent's table of the two transports:

- `input_audio_buffer.append` "is rejected under WebRTC with invalid_event_for_transport:
  the audio travels on the media track". The track's audio (`TrackAudio` frames) is the
  session's input instead.
- `output_audio_buffer.clear` is supported: "unplayed audio is buffered on the server,
  and barge-in and cancellation must flush it there; the server also flushes it itself on
  response.cancel and on a VAD interruption". The buffer is the call's `Playout`; a
  cancelled `response.done`, `response.cancel`, the clear, and `speech_started` while
  interruptions are on flush it.
- `session.created` goes out when the data channel opens (the call starts its driver
  then), not on connect.

The answer's audio goes to the playout, and not on the data channel: OpenAI sends no
`response.output_audio.delta` to a WebRTC client, whose audio is the track. And since
the server knows what was played, an answer it flushes is truncated to what the caller
heard (`PlaybackCut` → `conversation.item.truncated`), as a WebSocket client would
truncate it itself.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from dragoman.errors import ClientError, InvalidEvent, ServerError
from dragoman.protocol.realtime.client_parsers import AgentClientParser
from dragoman.protocol.realtime.generation import GA_RATE, Generation
from dragoman.sessions.agent import events as agent
from dragoman.sessions.speech.events import SpeechStarted
from dragoman.transports.adapters import Frame
from dragoman.transports.webrtc.channel import PlaybackCut, TrackAudio
from dragoman.transports.webrtc.playout import Playout
from dragoman.transports.websocket.agent import AgentCodec

#: The session's input rate: the track's audio is resampled to it (GA's `audio/pcm` rate).
INPUT_RATE = GA_RATE


class CallCodec:
    """A call's events: GA names, parsed and written as over a WebSocket but for the three."""

    def __init__(self, playout: Playout, interrupts: Callable[[], bool] = lambda: True) -> None:
        """`interrupts`: whether the session's turn detection interrupts a response now."""
        self._inner = AgentCodec(AgentClientParser(Generation.GA))
        self.playout = playout
        self._interrupts = interrupts
        #: Each response's output rate, from its `response.created`.
        self._rates: dict[str, int] = {}

    def parse(self, frame: Frame) -> agent.ClientEvent:
        if isinstance(frame, TrackAudio):
            return agent.AppendAudio(base64.b64encode(frame).decode("ascii"))
        if isinstance(frame, PlaybackCut):
            return agent.TruncateItem(frame.item_id, 0, frame.audio_end_ms)
        event = self._inner.parse(frame)
        if isinstance(event, agent.AppendAudio):
            refusal = InvalidEvent(
                "input_audio_buffer.append is not taken over WebRTC: the audio travels on the "
                "call's audio track.",
                code="invalid_event_for_transport",
            )
            return agent.Rejected(refusal, event.event_id)
        if isinstance(event, agent.ClearOutputAudio | agent.CancelResponse):
            self.playout.flush()  # what is queued stops now, whether or not a response still runs
        return event

    def write(self, event: agent.ServerEvent) -> str | None:
        if isinstance(event, agent.ResponseCreated):
            self._rates[event.response.id] = event.response.output_rate
        elif isinstance(event, agent.AudioDelta):
            pcm = base64.b64decode(event.delta)
            rate = self._rates.get(event.response_id, GA_RATE)
            self.playout.push(event.response_id, pcm, rate, event.item_id)
            return None
        elif isinstance(event, agent.ResponseDone):
            self._rates.pop(event.response.id, None)
            if event.response.status == "cancelled":
                self.playout.flush()
            else:
                self.playout.finish(event.response.id)
        elif isinstance(event, SpeechStarted) and self._interrupts():
            self.playout.flush()  # a barge-in, also into an answer already made but still playing
        return self._inner.write(event)

    def refusal(self, error: ClientError, frame: Frame) -> agent.ServerEvent:
        return self._inner.refusal(error, frame)

    def failure(self, error: ServerError, event: agent.ClientEvent | None) -> agent.ServerEvent:
        return self._inner.failure(error, event)
