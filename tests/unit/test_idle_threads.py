"""The LLM's threads follow what else computes (engines.workers.activity, cpu_load,
engines.llama_threads).

Engine calls are counted by the thread that runs them; the LLM decodes on its idle threads
only while no other thread is inside a call and other processes leave the cores alone,
checked before every llama_decode. The runtime is exercised on a recording stand-in for
its llama.cpp context, so no model is needed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from dragoman.cpu import available_cores
from dragoman.cpu_load import OthersLoad, Ticks, read_ticks
from dragoman.engines.llama_threads import IdleThreads, idle_threads_setting, threads_for
from dragoman.engines.llm.llama_runtime import PREFILL_CHUNK, LlamaRuntime
from dragoman.engines.workers import BatchingWorker, SerialWorker
from dragoman.engines.workers.activity import ACTIVITY, Activity


class OtherThread:
    """A thread that sits inside a counted engine call of `activity` until `leave`."""

    def __init__(self, activity: Activity) -> None:
        self._inside = threading.Event()
        self._leave = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(activity,), daemon=True)

    def _run(self, activity: Activity) -> None:
        with activity.running():
            self._inside.set()
            self._leave.wait(5)

    def __enter__(self) -> OtherThread:
        self._thread.start()
        assert self._inside.wait(5)
        return self

    def __exit__(self, *_: object) -> None:
        self._leave.set()
        self._thread.join(5)


# -- Activity ---------------------------------------------------------------------------


def test_a_call_in_another_thread_makes_it_busy_elsewhere() -> None:
    activity = Activity()
    assert not activity.busy_elsewhere()
    with OtherThread(activity):
        assert activity.busy_elsewhere()
    assert not activity.busy_elsewhere() and activity.threads() == frozenset()


def test_the_calling_threads_own_call_is_not_elsewhere() -> None:
    activity = Activity()
    with activity.running():
        assert not activity.busy_elsewhere()
        assert activity.threads() == {threading.get_ident()}
        with OtherThread(activity):
            assert activity.busy_elsewhere()  # inside its own call, it still sees the other


def test_nested_calls_count_until_the_outermost_ends() -> None:
    activity = Activity()
    seen: list[bool] = []
    inner_done, check_done, leave = threading.Event(), threading.Event(), threading.Event()

    def nested() -> None:
        with activity.running():
            with activity.running():
                pass
            inner_done.set()  # the inner call ended, the outer still runs
            check_done.wait(5)
        leave.set()

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    assert inner_done.wait(5)
    seen.append(activity.busy_elsewhere())
    check_done.set()
    assert leave.wait(5)
    thread.join(5)
    seen.append(activity.busy_elsewhere())
    assert seen == [True, False]


def test_a_counted_function_counts_in_whatever_thread_runs_it_and_stops_on_error() -> None:
    activity = Activity()
    inside: list[frozenset[int]] = []

    def fails() -> None:
        inside.append(activity.threads())
        raise ValueError("engine failed")

    counted = activity.counted(fails)
    thread_ids: list[int] = []

    def run() -> None:
        thread_ids.append(threading.get_ident())
        with pytest.raises(ValueError):
            counted()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    assert inside == [frozenset(thread_ids)]
    assert activity.threads() == frozenset()


# -- the workers count their calls --------------------------------------------------------


async def test_a_serial_workers_call_is_counted_while_it_runs() -> None:
    started, release = threading.Event(), threading.Event()
    ran_in: list[int] = []

    def call(request: str) -> bool:
        ran_in.append(threading.get_ident())
        started.set()
        release.wait(5)
        return ACTIVITY.busy_elsewhere()

    worker: SerialWorker[str, bool] = SerialWorker(call, name="tts")

    async def run() -> bool:
        async with worker.turn() as slot:
            return await slot.run("hello")

    task = asyncio.create_task(run())
    assert await asyncio.to_thread(started.wait, 5)
    assert ran_in[0] in ACTIVITY.threads()
    assert ACTIVITY.busy_elsewhere()  # seen from the test's thread
    release.set()
    await task
    assert ran_in[0] not in ACTIVITY.threads()
    await worker.close()


async def test_a_batching_workers_call_is_counted_while_it_runs() -> None:
    started, release = threading.Event(), threading.Event()
    ran_in: list[int] = []

    def call(requests: Sequence[str]) -> list[str]:
        ran_in.append(threading.get_ident())
        started.set()
        release.wait(5)
        return [r.upper() for r in requests]

    worker: BatchingWorker[str, str] = BatchingWorker(call, name="asr")
    task = asyncio.create_task(worker.submit("step"))
    assert await asyncio.to_thread(started.wait, 5)
    assert ran_in[0] in ACTIVITY.threads()
    release.set()
    assert await task == "STEP"
    assert ran_in[0] not in ACTIVITY.threads()
    await worker.close()


# -- the LLM's threads --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threads", "idle_threads", "busy", "expected"),
    [
        (1, 2, False, 2),  # nothing else computes: the spare core is lent
        (1, 2, True, 1),  # another call computes: its core is left to it
        (2, 2, False, 2),  # as many as it has: nothing to lend
        (2, 1, False, 2),  # fewer: never below its own
        (1, 0, False, 1),  # 0: off
    ],
)
def test_threads_for(threads: int, idle_threads: int, busy: bool, expected: int) -> None:
    assert threads_for(threads, idle_threads, busy) == expected


class Recorder:
    """`set_threads` of a context: every change it is told."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def set_threads(self, threads: int) -> None:
        self.calls.append(threads)


def test_idle_threads_switch_with_activity_and_only_on_a_change() -> None:
    activity, context = Activity(), Recorder()
    idle = IdleThreads(context.set_threads, 1, 2, activity, others=None)
    assert [idle.before_decode() for _ in range(3)] == [2, 2, 2]
    with OtherThread(activity):
        assert [idle.before_decode() for _ in range(2)] == [1, 1]
    assert idle.before_decode() == 2
    assert context.calls == [2, 1, 2] and idle.switches == 3 and idle.now == 2


def test_idle_threads_at_most_threads_never_touch_the_context() -> None:
    for threads, idle_threads in ((2, 2), (2, 1), (1, 0)):
        context = Recorder()
        idle = IdleThreads(context.set_threads, threads, idle_threads, Activity(), others=None)
        assert idle.before_decode() == threads and context.calls == []
        assert idle.describe() == f"{threads} thread{'s' if threads > 1 else ''}"


def test_held_idle_threads_decode_on_their_own_threads() -> None:
    context = Recorder()
    idle = IdleThreads(context.set_threads, 1, 2, Activity(), others=None)
    assert idle.before_decode() == 2
    with idle.held():
        assert idle.before_decode() == 1
    assert idle.before_decode() == 2
    assert context.calls == [2, 1, 2]
    assert idle.describe() == "1 thread (2 while no other engine computes)"


class FakeContext(Recorder):
    """The llama.cpp context under `LlamaRuntime`: records each decode's size and threads."""

    batch_size = 512

    def __init__(self) -> None:
        super().__init__()
        self.threads = 1
        self.decodes: list[tuple[int, int]] = []

    def set_threads(self, threads: int) -> None:
        super().set_threads(threads)
        self.threads = threads

    def decode(self, tokens: Sequence[int], start: int, seq: int, logits_from: int) -> None:
        self.decodes.append((len(tokens), self.threads))


def fake_runtime(context: FakeContext, activity: Activity) -> LlamaRuntime:
    """A `LlamaRuntime` on `context` instead of a loaded model (its decode loop is what runs)."""
    runtime = LlamaRuntime.__new__(LlamaRuntime)
    runtime._context = context  # type: ignore[assignment]
    runtime.batch_size = context.batch_size
    runtime.threads = 1
    runtime.idle = IdleThreads(context.set_threads, 1, 2, activity, others=None)
    return runtime


def test_the_runtime_checks_before_every_decode_and_gives_the_core_back_at_the_next_token() -> None:
    activity, context = Activity(), FakeContext()
    runtime = fake_runtime(context, activity)
    prompt = list(range(2 * PREFILL_CHUNK + 10))
    assert runtime.decode(prompt, 0) == len(prompt)  # three chunks, nothing else computing
    runtime.decode([7], len(prompt))  # a token of the reply
    with OtherThread(activity):  # TTS starts on the first clause
        runtime.decode([8], len(prompt) + 1)
        runtime.decode([9], len(prompt) + 2)
    runtime.decode([10], len(prompt) + 3)  # and ends
    assert context.decodes == [
        (PREFILL_CHUNK, 2),
        (PREFILL_CHUNK, 2),
        (10, 2),
        (1, 2),
        (1, 1),
        (1, 1),
        (1, 2),
    ]
    assert context.calls == [2, 1, 2]


# -- other processes ----------------------------------------------------------------------

STAT = """cpu  300 0 30 600 10 0 5 15 0 0
cpu0 100 0 10 300 5 0 2 5 0 0
cpu1 200 0 20 300 5 0 3 10 0 0
intr 12345 0 0
ctxt 999
"""
#: utime 40, stime 7 (fields 14 and 15), after a command name with a space and a parenthesis.
SELF_STAT = "4242 (python (x) y) S 1 4242 4242 0 -1 4194304 10 0 0 0 40 7 0 0 20 0 3 0"


def test_ticks_count_the_busy_time_of_this_process_cores_and_its_own() -> None:
    # cpu0: 100 + 10 + 2 + 5 (steal counts: the host's other guests); idle and iowait do not.
    assert read_ticks(STAT, SELF_STAT, frozenset({0})) == Ticks(117, 47)
    assert read_ticks(STAT, SELF_STAT, frozenset()) == Ticks(117 + 233, 47)


class FakeProc:
    """Ticks that advance as told, on a clock that advances as told."""

    def __init__(self) -> None:
        self.now = 0.0
        self.ticks: Ticks | None = Ticks(0, 0)

    def advance(self, seconds: float, others: float, own: float = 0.0, hz: int = 100) -> None:
        """`seconds` pass with `others` and `own` cores busy."""
        assert self.ticks is not None
        self.now += seconds
        extra_others, extra_own = round(others * seconds * hz), round(own * seconds * hz)
        self.ticks = Ticks(self.ticks.cores_busy + extra_others + extra_own, self.ticks.own + extra_own)


def fake_load(proc: FakeProc) -> OthersLoad:
    return OthersLoad(window_s=0.25, read=lambda: proc.ticks, clock=lambda: proc.now, hz=100)


def test_others_load_is_the_busy_time_not_this_process_s_over_the_last_window() -> None:
    proc = FakeProc()
    load = fake_load(proc)
    assert load.cores() is None  # no window yet
    proc.advance(0.5, others=1.5, own=2.0)  # this process's own busy cores do not count
    assert load.cores() == pytest.approx(1.5)
    proc.advance(0.1, others=0.0)
    assert load.cores() == pytest.approx(1.5)  # inside the window: the last one's value
    proc.advance(0.3, others=0.0, own=1.0)
    assert load.cores() == pytest.approx(0.0)


def test_no_proc_means_unknown() -> None:
    proc = FakeProc()
    proc.ticks = None
    assert fake_load(proc).cores() is None


def test_nothing_is_lent_while_other_processes_keep_a_core_busy() -> None:
    proc, context = FakeProc(), Recorder()
    idle = IdleThreads(context.set_threads, 1, 2, Activity(), others=fake_load(proc))
    proc.advance(0.3, others=0.0)
    assert idle.before_decode() == 2
    proc.advance(0.3, others=1.0)  # a build starts beside the server
    assert idle.before_decode() == 1
    proc.advance(0.3, others=0.05)  # and ends; the kernel's own work is no reason
    assert idle.before_decode() == 2
    proc.ticks, proc.now = None, proc.now + 0.3  # unknown: this process's own engines decide alone
    assert idle.before_decode() == 2
    assert context.calls == [2, 1, 2]


def test_an_unset_idle_threads_setting_is_every_core_and_a_set_one_is_kept() -> None:
    assert idle_threads_setting(None) == available_cores()
    assert idle_threads_setting(0) == 0 and idle_threads_setting(3) == 3
