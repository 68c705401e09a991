"""The pool of pipeline units that bounds the concurrent voice-agent sessions.

The reference agent claims one queue-driven pipeline unit per session from a pool
of `--num_pipelines` (default 1), and a session past the limit gets
`session_limit_reached`. Unlike the reference, a unit here holds no models: every
unit's session runs on the same shared engines, so a bigger pool loads nothing
more. A unit is what one session needs of its own while it runs, and what must be
clean before the next session takes it: its engine work in flight.

When its session ends, a unit is drained: its jobs are cancelled and the driver
waits for their engine calls to end. A unit whose calls did not end in time is
quarantined: shown in `GET /v1/pool` with the reason, and never handed out again
while the process runs, so a stuck engine call cannot leak into the next session.

Admission waits briefly (`acquire_within`, ADMISSION_WAIT_S) for a unit to be released: a
client that closes its session and at once opens a new one (a page reload, a framework
that reconnects) would otherwise be refused by its own old session, still draining. A
client past a pool that stays full is refused after that wait.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from dragoman.logs import get_logger

log = get_logger(__name__)

UnitState = Literal["idle", "busy", "quarantined"]
#: How long a new session waits for a unit whose session is closing (it drains its engine
#: calls within a token or a chunk) before it is refused.
ADMISSION_WAIT_S = 2.0


@dataclass
class PipelineUnit:
    index: int
    state: UnitState = "idle"
    session_id: str | None = None
    #: When the unit entered its state (time.time()).
    since: float = field(default_factory=time.time)
    #: Sessions this unit has served.
    served: int = 0
    #: Why it was quarantined.
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "state": self.state,
            "session_id": self.session_id,
            "since": round(self.since, 3),
            "sessions_served": self.served,
            "reason": self.reason,
        }


class PipelinePool:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a pool holds at least one unit")
        self.units = [PipelineUnit(index) for index in range(size)]
        #: Set whenever a unit is released, for admissions waiting on one.
        self._released = asyncio.Event()

    async def acquire_within(self, session_id: str, seconds: float) -> PipelineUnit | None:
        """As `acquire`, waiting up to `seconds` for a busy unit to be released."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (unit := self.acquire(session_id)) is None:
            remaining = deadline - loop.time()
            if remaining <= 0 or not any(u.state == "busy" for u in self.units):
                return None  # nothing will be freed: every other unit is quarantined
            self._released.clear()
            try:
                await asyncio.wait_for(self._released.wait(), remaining)
            except TimeoutError:
                return None
        return unit

    def acquire(self, session_id: str) -> PipelineUnit | None:
        """An idle unit, now busy with `session_id`; None when every unit is taken or quarantined."""
        for unit in self.units:
            if unit.state == "idle":
                unit.state, unit.session_id, unit.since = "busy", session_id, time.time()
                unit.served += 1
                return unit
        return None

    def release(self, unit: PipelineUnit, drained: bool) -> None:
        """The unit's session ended; it is reused only when its work drained."""
        if unit.state != "busy":
            raise RuntimeError(f"unit {unit.index} released while {unit.state}")
        if drained:
            unit.state, unit.session_id = "idle", None
        else:
            unit.state, unit.reason = "quarantined", "engine work did not stop after the session ended"
            log.error("pipeline unit quarantined", unit=unit.index, session=unit.session_id)
        unit.since = time.time()
        self._released.set()

    def snapshot(self) -> dict[str, Any]:
        counts = {
            state: sum(u.state == state for u in self.units) for state in ("idle", "busy", "quarantined")
        }
        return {"size": len(self.units), **counts, "units": [u.as_dict() for u in self.units]}
