"""Audio sent faster than real time is read at real time while others keep to it.

A client may send audio faster than it plays: a burst after a network stall, a
recording replayed through the realtime API, or a flood. Its steps already yield to
the sessions at real-time pace (`Priority.AHEAD`), but what it sends is still
base64-decoded, resampled and run through VAD on the same cores, and its steps fill
every gap the live sessions leave, so a live step often waits for one of them.

So once a session is more than `burst_s` ahead of real time while another session
keeps to real time, its driver stops reading from it until real time catches up:
backpressure through the socket (its sends wait), nothing refused and nothing lost.
A server with no live session to protect reads it as fast as it sends.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Audio a session may have sent beyond the time it has been connected (a client's
#: buffering, a burst after a stall) before its steps count as running ahead of real time.
AHEAD_SLACK_S = 3.0
#: Audio a session may be ahead of real time before it is read at real time (when others
#: are live): a reconnecting client's buffer, or the first seconds of a recording.
DEFAULT_BURST_S = 10.0
#: A session that sent a frame at real-time pace this recently is live.
LIVE_WINDOW_S = 5.0


class AudioPacing:
    """Shared by every session driver of a server: who is live, and how long to stop reading."""

    def __init__(
        self,
        burst_s: float | None = DEFAULT_BURST_S,
        *,
        live_window_s: float = LIVE_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`burst_s` None (or 0) never paces."""
        self.burst_s = burst_s or None
        self.live_window_s = live_window_s
        self._clock = clock
        #: Each live session's key, and when it last sent a frame at real-time pace.
        self._live: dict[int, float] = {}

    def wait_s(self, key: int, ahead_s: float) -> float:
        """After a frame of session `key`, which is now `ahead_s` seconds of audio ahead of
        real time (0 for a session that takes no audio): how long to stop reading from it."""
        now = self._clock()
        if ahead_s <= AHEAD_SLACK_S:
            self._live[key] = now
            return 0.0
        self._live.pop(key, None)
        if self.burst_s is None or ahead_s <= self.burst_s or not self._others_live(key, now):
            return 0.0
        # Real time catches up one second per second: then it is `burst_s` ahead again.
        return ahead_s - self.burst_s

    def leave(self, key: int) -> None:
        self._live.pop(key, None)

    def _others_live(self, key: int, now: float) -> bool:
        return any(other != key and now - seen <= self.live_window_s for other, seen in self._live.items())

    def __len__(self) -> int:
        """Sessions counted as live now (sessions that went quiet drop out of the count)."""
        now = self._clock()
        return sum(1 for seen in self._live.values() if now - seen <= self.live_window_s)
