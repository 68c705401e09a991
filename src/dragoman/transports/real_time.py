"""Clients that send audio faster than real time, next to those that keep to it.

A client may send audio faster than it plays: a burst after a network stall, a
recording replayed through the realtime API, or a flood. Two rules keep such a
client from slowing the sessions at real-time pace:

- once it is `AHEAD_SLACK_S` ahead, its steps run behind theirs (`Priority.AHEAD`,
  in engine calls of their own, in the gaps: `transports/driver.py`);
- once it is more than `burst_s` ahead while another session is live, its appends
  are refused with `input_audio_buffer_backlog` (the speech front, told by the
  driver before each frame) until real time has caught up with what it sent.

The second rule refuses rather than stops reading: a socket left unread holds the
client's keepalive pings behind its own audio, and both ends then close the
connection as dead (uvicorn with 1011 after its ping timeout). Refused appends are
parsed but not decoded, so they cost next to nothing. A server with no live session
to protect takes audio as fast as it comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Audio a session may have sent beyond the time it has been connected (a client's
#: buffering, a burst after a stall) before its steps count as running ahead of real time.
AHEAD_SLACK_S = 3.0
#: Audio a session may be ahead of real time, while others are live, before its appends are
#: refused: a reconnecting client's buffer, or the first seconds of a recording.
DEFAULT_BURST_S = 10.0
#: A session that sent a frame at real-time pace this recently is live.
LIVE_WINDOW_S = 5.0


class RealTimeGuard:
    """Shared by every session driver of a server: who is live, and who is too far ahead."""

    def __init__(
        self,
        burst_s: float | None = DEFAULT_BURST_S,
        *,
        live_window_s: float = LIVE_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`burst_s` None (or 0) never refuses."""
        self.burst_s = burst_s or None
        self.live_window_s = live_window_s
        self._clock = clock
        #: Each live session's key, and when it last sent a frame at real-time pace.
        self._live: dict[int, float] = {}

    def refuses(self, key: int, ahead_s: float) -> bool:
        """Before a frame of session `key`, which has taken `ahead_s` seconds of audio beyond
        the time it has been connected (0 for a session that takes no audio): whether its
        audio is refused now."""
        now = self._clock()
        if ahead_s <= AHEAD_SLACK_S:
            self._live[key] = now
            return False
        self._live.pop(key, None)
        if self.burst_s is None or ahead_s <= self.burst_s:
            return False
        return any(other != key and now - seen <= self.live_window_s for other, seen in self._live.items())

    def leave(self, key: int) -> None:
        self._live.pop(key, None)

    def __len__(self) -> int:
        """Sessions counted as live now (sessions that went quiet drop out of the count)."""
        now = self._clock()
        return sum(1 for seen in self._live.values() if now - seen <= self.live_window_s)
