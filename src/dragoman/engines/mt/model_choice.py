"""`auto`: which MT model this CPU runs within the latency budget, measured at start-up.

The 1.5B translates far better than the 0.5B (FLORES en→de BLEU 29 against 18,
MODELS.md) but is three times the work per token. Whether it keeps updates within
the reference client's budget (15 s for any update, 2 s at p95) depends on the CPU
and on the threads the engine gets, so it is measured, not guessed from flags: a
short prefill and a few decode steps on the 1.5B itself, in the context the engine
will use, best of two rounds (the first also pays for first-touch page faults of
the weights; another process on a shared machine slows a round, never speeds it).

A start-up on a busy machine measures the CPU slower than it is, so the best speed
ever measured on this CPU with these threads is remembered in the model cache
(`SpeedMemory`) and the choice is made on that: once a quiet start has seen the
1.5B fast enough, a busy one does not fall back to the 0.5B.

`choose_model` is the rule, a pure function of the numbers so it can be tested:
the 1.5B when it decodes at least `MIN_DECODE_TOK_S` and prefills at least
`MIN_PREFILL_TOK_S`. At those speeds a streaming update (a few new source tokens,
a draft of about 6 tokens up to the frontier) takes about a second, and a final
pass over a 40-token translation about 6 s; below them the 0.5B, about twice as
fast, is the better trade.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

#: The slowest decode (tokens/s, at the engine's threads) at which the 1.5B is chosen.
MIN_DECODE_TOK_S = 7.0
#: The slowest prefill (tokens/s) at which the 1.5B is chosen.
MIN_PREFILL_TOK_S = 25.0
#: Tokens of one timed prefill and decode steps after it, per round.
PREFILL_TOKENS = 24
DECODE_TOKENS = 6
ROUNDS = 2
#: The remembered best speeds, in the model cache.
SPEED_MEMORY_FILE = "mt-speed.json"
#: A round is not repeated once this much time went on measuring (a very slow CPU).
TIME_LIMIT_S = 6.0

_TEXT = (
    "The committee met on Tuesday to discuss the new budget, and most members agreed that "
    "schools and hospitals should receive more money next year."
)


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


@dataclass(frozen=True)
class ModelChoice:
    #: "quality" (the 1.5B, preset `low_latency`) or "fast" (the 0.5B, preset `fast`).
    pick: str
    reason: str

    @property
    def quality(self) -> bool:
        return self.pick == "quality"


def choose_model(sample: SpeedSample | None, *, quality_installed: bool) -> ModelChoice:
    """The model `auto` runs: the 1.5B where installed and fast enough, else the 0.5B."""
    if not quality_installed:
        return ModelChoice("fast", "the 1.5B model is not installed (make install)")
    if sample is None:
        return ModelChoice("fast", "the 1.5B model could not be measured")
    speeds = (
        f"the 1.5B decodes {sample.decode_tok_s:.1f} tok/s and prefills {sample.prefill_tok_s:.0f} tok/s "
        f"on {sample.threads} thread{'s' if sample.threads != 1 else ''}"
    )
    needed = f"(needs {MIN_DECODE_TOK_S:g} and {MIN_PREFILL_TOK_S:g})"
    if sample.decode_tok_s >= MIN_DECODE_TOK_S and sample.prefill_tok_s >= MIN_PREFILL_TOK_S:
        return ModelChoice("quality", f"{speeds} {needed}")
    return ModelChoice("fast", f"{speeds}: too slow {needed}")


class _Context(Protocol):
    """What is measured: `engines.mt.llama_context.TappedContext`."""

    threads: int

    def eval(self, tokens: list[int], out_from: int, cols: slice | None) -> tuple[list[int], object]: ...

    def truncate(self, length: int) -> None: ...


def measure(ctx: _Context, prompt_ids: list[int]) -> SpeedSample:
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


def probe_text() -> str:
    """The English sentence whose tokens the probe feeds (a translation prompt's kind of text)."""
    return _TEXT
