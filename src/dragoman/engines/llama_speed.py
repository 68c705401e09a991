"""How fast a llama.cpp model runs here: a short measurement at start-up, and the best one remembered.

Shared by the engines whose `auto` picks between the packaged 1.5B and 0.5B by the
1.5B's speed on this CPU (MT: `engines.mt.model_choice`; the voice agent's LLM:
`engines.llm.model_choice`). The 1.5B's speed depends on the CPU and on the threads
the engine gets, so it is measured, not guessed from flags: a short prefill and a few
decode steps on the model itself, in the context the engine will use, best of two
rounds (the first also pays for first-touch page faults of the weights; another
process on a shared machine slows a round, never speeds it).

A start-up on a busy machine measures the CPU slower than it is, so the best speed
ever measured on this CPU with these threads is remembered in the model cache
(`SpeedMemory`) and the choice is made on that: once a quiet start has seen the
1.5B fast enough, a busy one does not fall back to the 0.5B.

`pick_by_speed` is the whole of `auto` (load, measure, remember, choose, load the
other model if need be), shared by both factories; each brings its own rule.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from dragoman.cpu import cpu_info
from dragoman.errors import EngineFailure, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Tokens of one timed prefill and decode steps after it, per round.
PREFILL_TOKENS = 24
DECODE_TOKENS = 6
ROUNDS = 2
#: A round is not repeated once this much time went on measuring (a very slow CPU).
TIME_LIMIT_S = 6.0


@dataclass(frozen=True)
class SpeedSample:
    """The 1.5B's measured speed with the engine's threads."""

    prefill_tok_s: float
    decode_tok_s: float
    threads: int
    seconds: float


def best_of(sample: SpeedSample, remembered: SpeedSample | None) -> SpeedSample:
    """Each speed at its best over `sample` and what was `remembered` (same CPU and threads):
    load only ever slows a measurement down."""
    if remembered is None or remembered.threads != sample.threads:
        return sample
    return replace(
        sample,
        prefill_tok_s=max(sample.prefill_tok_s, remembered.prefill_tok_s),
        decode_tok_s=max(sample.decode_tok_s, remembered.decode_tok_s),
    )


class SpeedMemory:
    """The best speeds measured per model, CPU and threads, in a small JSON file of the cache."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def key(model: str, cpu: str, threads: int) -> str:
        return f"{model} | {cpu} | {threads} threads"

    def recall(self, key: str) -> SpeedSample | None:
        entry = self._read().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return SpeedSample(
                float(entry["prefill_tok_s"]), float(entry["decode_tok_s"]), int(entry["threads"]), 0.0
            )
        except (KeyError, TypeError, ValueError):
            return None  # a damaged entry is measured again

    def remember(self, key: str, sample: SpeedSample) -> None:
        """Store `sample` (already the best of it and the recalled one) under `key`; a cache
        that cannot be written only loses the memory."""
        entries = self._read()
        entries[key] = {
            "prefill_tok_s": round(sample.prefill_tok_s, 2),
            "decode_tok_s": round(sample.decode_tok_s, 2),
            "threads": sample.threads,
        }
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Written whole and renamed: two servers starting at once never read half a file.
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(entries, out, indent=1, sort_keys=True)
            os.replace(tmp, self.path)

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


class SpeedContext(Protocol):
    """What is measured: a context that evaluates tokens and returns the greedy next ones
    (`engines.mt.llama_context.TappedContext`, `engines.llm.llama_runtime.SpeedProbe`)."""

    threads: int

    def eval(self, tokens: list[int], out_from: int, cols: slice | None) -> tuple[list[int], object]: ...

    def truncate(self, length: int) -> None: ...


def measure(ctx: SpeedContext, prompt_ids: list[int]) -> SpeedSample:
    """Best-of-`ROUNDS` prefill and decode speed on `ctx`, which is left empty."""
    ids = list(prompt_ids)[:PREFILL_TOKENS]
    if len(ids) < 2:
        raise ValueError("the speed probe needs a prompt of at least 2 tokens")
    started = time.perf_counter()
    best_prefill = best_decode = 0.0
    try:
        for _ in range(ROUNDS):
            ctx.truncate(0)
            t0 = time.perf_counter()
            choices, _ = ctx.eval(ids, len(ids) - 1, None)
            t1 = time.perf_counter()
            token = choices[-1]
            for _step in range(DECODE_TOKENS):
                choices, _ = ctx.eval([token], 0, None)
                token = choices[0]
            t2 = time.perf_counter()
            best_prefill = max(best_prefill, len(ids) / max(t1 - t0, 1e-6))
            best_decode = max(best_decode, DECODE_TOKENS / max(t2 - t1, 1e-6))
            if time.perf_counter() - started > TIME_LIMIT_S:
                break
    finally:
        ctx.truncate(0)
    return SpeedSample(best_prefill, best_decode, ctx.threads, time.perf_counter() - started)


def speed_key(model: str, kernels: str, threads: int) -> str:
    """`model`'s entry in a speed memory: this CPU, llama.cpp's kernels (a variant named by
    hand measures apart) and the threads."""
    return SpeedMemory.key(model, f"{cpu_info().describe()}, {kernels}", threads)


class MeasurableEngine(Protocol):
    """A llama.cpp engine whose `auto` is chosen by its speed (MT's and the LLM's)."""

    @property
    def kernels(self) -> str: ...

    def measure_speed(self) -> SpeedSample: ...

    def close(self) -> None: ...


E = TypeVar("E", bound=MeasurableEngine)
C = TypeVar("C")


@dataclass(frozen=True)
class SpeedPick(Generic[E, C]):
    """What `pick_by_speed` loaded, and why."""

    engine: E
    choice: C
    #: The speeds the choice was made on (the best of this start and the memory), if any.
    sample: SpeedSample | None
    #: This start's own measurement, if one was made.
    measured: SpeedSample | None


def pick_by_speed(
    quality_model: str,
    *,
    installed: bool,
    load: Callable[[str], E],
    memory_path: Path,
    choose: Callable[[SpeedSample | None], C],
    model_of: Callable[[C], str],
) -> SpeedPick[E, C]:
    """`auto`: load `quality_model` (where `installed`), measure it, and keep it if `choose`
    says so, else load the model `choose` names instead.

    The choice is made on the best speed this CPU has shown (`SpeedMemory` at
    `memory_path`), which this start's measurement updates. A model that fails to load or
    measure counts as unmeasured: `choose(None)`.
    """
    engine: E | None = None
    sample = measured = None
    if installed:
        try:
            engine = load(quality_model)
            measured = engine.measure_speed()
            memory = SpeedMemory(memory_path)
            key = speed_key(quality_model, engine.kernels, measured.threads)
            sample = best_of(measured, memory.recall(key))
            memory.remember(key, sample)
        except (ModelUnavailable, EngineFailure, ValueError) as exc:
            log.warning("the model could not be measured", model=quality_model, error=str(exc))
            if engine is not None:
                engine.close()
                engine = None
    choice = choose(sample)
    model = model_of(choice)
    if engine is not None and model != quality_model:
        engine.close()
        engine = None
    if engine is None:
        engine = load(model)
    return SpeedPick(engine, choice, sample, measured)


def describe(sample: SpeedSample | None) -> str | None:
    """`prefill / decode` tokens per second, for a log line."""
    return None if sample is None else f"{sample.prefill_tok_s:.1f} / {sample.decode_tok_s:.2f}"
