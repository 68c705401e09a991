"""`Housekeeping`: background work a closed session leaves behind (dropping its caches), at
the lowest priority on the engine's own worker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from dragoman.engines.workers.calls import Priority
from dragoman.engines.workers.serial import SerialWorker


class Housekeeping:
    """Engine work no session waits for, such as dropping a closed session's cache: run in a
    background turn on the engine's worker, after the work that waits, and cancelled at close."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, worker: SerialWorker[Any, Any], fn: Callable[[], object], name: str) -> None:
        async def run() -> None:
            async with worker.turn(Priority.BACKGROUND) as slot:
                await slot.call(fn)

        self._track(asyncio.create_task(run(), name=name))

    def soon(self, fn: Callable[[], object], name: str) -> None:
        """`fn` in a thread of its own, for an engine whose calls need no turn (remote nodes)."""

        async def run() -> None:
            await asyncio.to_thread(fn)

        self._track(asyncio.create_task(run(), name=name))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
