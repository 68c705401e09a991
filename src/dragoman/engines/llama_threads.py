"""A llama.cpp context's threads: more while no other engine call of the process computes.

The server gives the agent's LLM every core but one beside other services, and MT its
share (`transports/runtime.py`): llama.cpp's threads spin at each barrier, and with one
other busy thread on 2 cores, 11 tokens took 10.4 s on 2 threads against 1.4 s on 1.
But the answer comes when the user has stopped talking, and then ASR, MT and TTS are
often idle: the spare core would sit unused through the prefill and the first words,
which is the first audio's wait. The interpreter's MT drafts between the speech front's
steps, when the ASR's core is idle as often. So before every llama_decode (each prompt
chunk, each generated token) the LLM and the MT engine ask `engines.workers.activity`
whether another engine call runs, and decode on `idle_threads` when none does, on
`threads` when one does: a TTS, ASR or MT call that starts gets its core back at the
next token.

Other processes are no engine calls of ours, but a borrowed thread slows llama.cpp down
just as much beside them (a 1.5B turn: 2.9 tok/s on 2 threads against 12.6 on 1, with
other processes keeping 1 to 1.5 cores busy), so nothing is lent either while they kept more than
`MAX_OTHERS_CORES` busy in the last quarter second (`cpu_load`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from dragoman.cpu import available_cores
from dragoman.cpu_load import OTHERS, OthersLoad
from dragoman.engines.workers.activity import ACTIVITY, Activity

#: The most cores' worth of time other processes may have taken lately for a thread to be lent:
#: the kernel's own housekeeping stays below it.
MAX_OTHERS_CORES = 0.2


def idle_threads_setting(setting: int | None) -> int:
    """`llm.idle_threads` / `mt.idle_threads` as a count: None is every core this process may use."""
    return available_cores() if setting is None else setting


def threads_for(threads: int, idle_threads: int, busy_elsewhere: bool) -> int:
    """The threads of the next llama_decode: `idle_threads` while nothing else computes, when
    they are more; else `threads`."""
    return idle_threads if idle_threads > threads and not busy_elsewhere else threads


class IdleThreads:
    """Sets a context's threads (`set_threads`) before each decode by what else computes.

    The context starts on `threads`; `idle_threads` at most `threads` never lends (0: off).
    Used from the one thread that decodes.
    """

    def __init__(
        self,
        set_threads: Callable[[int], None],
        threads: int,
        idle_threads: int,
        activity: Activity = ACTIVITY,
        others: OthersLoad | None = OTHERS,
    ) -> None:
        """`others`: other processes' load (None: not asked)."""
        self._set_threads = set_threads
        self.threads = threads
        self.idle_threads = idle_threads
        self._activity = activity
        self._others = others
        if others is not None and self.lends:
            others.cores()  # the first window starts now, so the first turn has one
        #: The threads the context decodes on now.
        self.now = threads
        #: Times the threads were changed (each costs a call into llama.cpp, no more).
        self.switches = 0
        self._held = False

    @property
    def lends(self) -> bool:
        return self.idle_threads > self.threads

    def before_decode(self) -> int:
        """Set the threads of the next decode; returns them."""
        if not self.lends:
            return self.now
        busy = self._held or self._activity.busy_elsewhere() or self._others_busy()
        wanted = threads_for(self.threads, self.idle_threads, busy)
        if wanted != self.now:
            self._set_threads(wanted)
            self.now = wanted
            self.switches += 1
        return wanted

    def _others_busy(self) -> bool:
        load = self._others.cores() if self._others is not None else None
        return load is not None and load > MAX_OTHERS_CORES  # unknown (no /proc): ours alone

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Decode on `threads` alone inside the block: a speed probe measures what the engine is
        sure to have, not what it borrows."""
        self._held = True
        try:
            yield
        finally:
            self._held = False

    def describe(self) -> str:
        """For /health: "1 thread" or "1 thread (2 while no other engine computes)"."""
        base = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        return f"{base} ({self.idle_threads} while no other engine computes)" if self.lends else base
