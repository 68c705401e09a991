"""Several MT engines on one model, so that drafts of different sessions compute at once.

One engine drafts one request at a time (its KV cache serves one call), and the server
used to run every MT session's drafts through it in turn. With two interpreter sessions
on 2 cores that one engine was the queue: its drafts ran on one thread (the speech
front held the other core part of the time), one session's final waited for the
other's draft, and the core the speech front left idle stayed idle (Intel Xeon,
2 FLEURS sessions: MT busy 29 s of 33, ASR 14 s). llama.cpp contexts on one model
share its weights, and two contexts decoding on one thread each ran as fast side by
side as one alone (133 ms a token, the 1.5B's Q8_0 copy): a lane is one more context,
its KV cache and its compute buffers, and no more weights.

Each session (an MT request's `cache_key`) keeps the lane it was first given, since its
keys and values live in that lane's context; a new session takes the lane with the
fewest sessions, so up to `lanes` sessions never wait for each other. With more
sessions than lanes, those sharing a lane take turns on it as all did before. A lane
alone borrows the idle cores as before (`engines.llama_threads`); beside a busy lane,
each decodes on its own threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from dragoman.cpu import available_cores
from dragoman.engines.info import EngineInfo
from dragoman.engines.mt.base import MTDraft, MTEngine, MTRequest

#: Lanes `auto` opens at most: each one holds a context of its own (~0.4 GB for the 1.5B).
MAX_AUTO_LANES = 4


def auto_lanes(threads: int, cores: int | None = None) -> int:
    """Lanes of `threads` each that fit the cores this process may use, at least one."""
    cores = available_cores() if cores is None else cores
    return max(1, min(MAX_AUTO_LANES, cores // max(1, threads)))


class MTLanes(MTEngine):
    """Engines on one model (the first one's name, presets and heads), each session on one."""

    def __init__(self, lanes: Sequence[MTEngine]) -> None:
        if not lanes:
            raise ValueError("MTLanes needs at least one engine")
        self.lanes = list(lanes)
        first = self.lanes[0]
        self.name = first.name
        self.chosen_preset = first.chosen_preset
        self.capabilities = replace(first.capabilities, parallel_calls=len(self.lanes))
        self._lock = threading.Lock()
        #: The lane of each session key that has drafted and not been forgotten.
        self._assigned: dict[str, int] = {}

    def lane_of(self, cache_key: str | None) -> int:
        """The lane that drafts `cache_key`'s requests; a new key gets the least used lane.

        A request with no key reuses nothing, so it takes the least used lane each time.
        """
        with self._lock:
            if cache_key is not None and cache_key in self._assigned:
                return self._assigned[cache_key]
            used = Counter(self._assigned.values())
            lane = min(range(len(self.lanes)), key=lambda index: (used[index], index))
            if cache_key is not None:
                self._assigned[cache_key] = lane
            return lane

    def lane_for(self, request: MTRequest) -> int | None:
        """The lane of `request`, for a worker that runs one call a lane at a time; None for a
        request with no key, which takes whichever lane is least used when it runs."""
        return None if request.cache_key is None else self.lane_of(request.cache_key)

    def directions(self) -> list[str]:
        return self.lanes[0].directions()

    def draft(self, request: MTRequest) -> MTDraft:
        # Each engine serialises its own calls, so a key's requests never overlap on its lane.
        return self.lanes[self.lane_of(request.cache_key)].draft(request)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.lanes[0].decode(token_ids)

    def warm_up(self) -> None:
        for lane in self.lanes:
            lane.warm_up()

    def describe(self) -> EngineInfo:
        info = self.lanes[0].describe()
        return replace(info, compute_reason=f"{info.compute_reason}, {len(self.lanes)} lanes")

    def forget(self, cache_key: str) -> None:
        with self._lock:
            lane = self._assigned.pop(cache_key, None)
        if lane is not None:
            self.lanes[lane].forget(cache_key)

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()
