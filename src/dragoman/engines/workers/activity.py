"""Which threads of this process are inside an engine call now.

Every worker counts its calls here while their threads run (`SerialWorker.call`,
`BatchingWorker`), and so does the work that computes outside a worker (the turn model,
a large frame's VAD, a file's decoding and VAD), so an engine can ask whether anything
else computes beside it (`busy_elsewhere`): the embedded LLM takes every core only while
nothing does (`engines.llama_threads`). llama.cpp's threads spin at each barrier, and
one thread too many on 2 cores made 11 tokens take 10.4 s instead of 1.4 s
(`transports/runtime.py`), so a core is lent only when no other call holds it.

A call to a remote engine (an MT node, a TTS or ASR server) counts too, though it only
waits: the LLM then keeps to its own threads, which costs it speed, never the CPU.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Activity:
    """Engine calls running now, by thread; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Counter[int] = Counter()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The calling thread is inside an engine call until the block ends."""
        ident = threading.get_ident()
        with self._lock:
            self._running[ident] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[ident] -= 1
                if not self._running[ident]:
                    del self._running[ident]

    def counted(self, fn: Callable[[], T]) -> Callable[[], T]:
        """`fn`, counted as an engine call while it runs (in whatever thread calls it)."""

        def call() -> T:
            with self.running():
                return fn()

        return call

    def busy_elsewhere(self) -> bool:
        """Whether a thread other than the calling one is inside an engine call."""
        ident = threading.get_ident()
        with self._lock:
            return any(thread != ident for thread in self._running)

    def threads(self) -> frozenset[int]:
        """The threads (`threading.get_ident`) inside an engine call now."""
        with self._lock:
            return frozenset(self._running)


#: The process's one record: every worker's calls.
ACTIVITY = Activity()
