"""The updates an MT session has received and not yet answered.

MT protocol v1: "a mailbox of size one for partial updates (latest wins) plus a sticky
ordered queue for finals". Pending updates sit in one queue in arrival order holding at
most one partial; a new partial replaces the queued one, and a final drops a queued
partial of its own utterance. The replacement always has a larger seq and is always
answered, so a client reading "until seq >= its last" never waits on a dropped one.

The sticky finals are bounded: past `max_finals` waiting, a new final is refused (the
session answers it at once with processing_failed, "that update was dropped; the session
stays usable"), so a client that sends finals faster than they are translated cannot make
the server hold them without end.
"""

from __future__ import annotations

from collections import deque

from dragoman.sessions.mt.events import Update


class UpdateQueue:
    """Pending updates, oldest first: at most one partial, and at most `max_finals` finals."""

    def __init__(self, max_finals: int) -> None:
        self.max_finals = max_finals
        self._updates: deque[Update] = deque()
        #: Partials replaced before they were drafted.
        self.coalesced = 0

    def push(self, update: Update) -> bool:
        """Queue `update`; False (nothing changed) for a final past the bound."""
        if update.is_final and sum(queued.is_final for queued in self._updates) >= self.max_finals:
            return False
        superseded = [
            queued
            for queued in self._updates
            if not queued.is_final and (not update.is_final or queued.utterance_id == update.utterance_id)
        ]
        for queued in superseded:
            self._updates.remove(queued)
        self.coalesced += len(superseded)
        self._updates.append(update)
        return True

    @property
    def head(self) -> Update:
        """The oldest pending update (the queue is not empty)."""
        return self._updates[0]

    def pop(self) -> None:
        """Drop the oldest pending update (answered, or planned into a job)."""
        self._updates.popleft()

    def __bool__(self) -> bool:
        return bool(self._updates)
