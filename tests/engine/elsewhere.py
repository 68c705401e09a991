"""Another engine call in flight, for the engine tests of lent threads (`engines.llama_threads`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from dragoman.engines.workers.activity import ACTIVITY


@contextlib.contextmanager
def engine_call_elsewhere() -> Iterator[None]:
    """Inside the block a second thread is inside an engine call (as a TTS, ASR or MT call
    running on a worker would be), so an engine asking `ACTIVITY.busy_elsewhere` sees one."""
    inside, leave = threading.Event(), threading.Event()

    def call() -> None:
        with ACTIVITY.running():
            inside.set()
            leave.wait(30)

    other = threading.Thread(target=call, daemon=True)
    other.start()
    try:
        assert inside.wait(5), "the other engine call did not start"
        yield
    finally:
        leave.set()
        other.join(5)
