"""`EngineThreads`: the threads one worker's engine calls run in, as many as its lanes.

Not asyncio's default executor (`asyncio.to_thread`): that one has min(32, cores + 4)
threads for the whole process, 6 on 2 cores, shared by every worker, each session's large
frames and every file's decoding. A seventh call would wait in its first-in-first-out
queue, outside the workers' priorities (an interpreter's MT final behind an agent's TTS),
and a remote engine's lanes (16 MT drafts waiting on nodes at once) could never all be in
flight. With threads of its own, a worker's lanes are exactly what runs.

A call given up as hung keeps its thread until the engine returns; the worker's pool is
then replaced, so the next call runs in a fresh thread and the lanes stay whole.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from dragoman.engines.workers.activity import ACTIVITY

T = TypeVar("T")


class EngineThreads:
    """`size` threads named after the worker (`dragoman-mt_0`, as py-spy and the logs show them)."""

    def __init__(self, name: str, size: int) -> None:
        if size < 1:
            raise ValueError("an engine needs at least one thread")
        self.name = name
        self.size = size
        self._pool = self._new_pool()

    def _new_pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=self.size, thread_name_prefix=f"dragoman-{self.name}")

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """`fn` in one of the threads, counted as an engine call; the caller's context
        (the log fields bound to its session) goes with it, as with `asyncio.to_thread`."""
        context = contextvars.copy_context()
        call = functools.partial(context.run, ACTIVITY.counted(fn))
        return asyncio.get_running_loop().run_in_executor(self._pool, call)

    def abandon(self, future: asyncio.Future[Any]) -> None:
        """Leave a hung call's thread to end on its own (what it raises then is nobody's),
        and give the calls after it a fresh pool."""
        future.add_done_callback(lambda done: done.cancelled() or done.exception())
        hung, self._pool = self._pool, self._new_pool()
        hung.shutdown(wait=False)  # its threads end as their calls do

    def close(self) -> None:
        """No new calls; a call still running ends on its own."""
        self._pool.shutdown(wait=False)
