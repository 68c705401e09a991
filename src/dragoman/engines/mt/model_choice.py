"""`auto`: which MT model this CPU runs within the latency budget, measured at start-up.

The 1.5B translates far better than the 0.5B (FLORES en→de BLEU 29 against 18,
MODELS.md) but is three times the work per token. Whether it keeps updates within
the reference client's budget (15 s for any update, 2 s at p95) depends on the CPU
and on the threads the engine gets, so it is measured at start-up, and the best
speed measured on this CPU remembered (`engines.llama_speed`).

`choose_model` is the rule, a pure function of the numbers so it can be tested:
the 1.5B when it decodes at least `MIN_DECODE_TOK_S` and prefills at least
`MIN_PREFILL_TOK_S`. At those speeds a streaming update (a few new source tokens,
a draft of about 6 tokens up to the frontier) takes about a second, and a final
pass over a 40-token translation about 6 s; below them the 0.5B, about twice as
fast, is the better trade.
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.engines.llama_speed import (
    DECODE_TOKENS,
    PREFILL_TOKENS,
    ROUNDS,
    TIME_LIMIT_S,
    SpeedMemory,
    SpeedSample,
    best_of,
    measure,
)

__all__ = [
    "DECODE_TOKENS",
    "MIN_DECODE_TOK_S",
    "MIN_PREFILL_TOK_S",
    "PREFILL_TOKENS",
    "ROUNDS",
    "SPEED_MEMORY_FILE",
    "TIME_LIMIT_S",
    "ModelChoice",
    "SpeedMemory",
    "SpeedSample",
    "best_of",
    "choose_model",
    "measure",
    "probe_text",
]

#: The slowest decode (tokens/s, at the engine's threads) at which the 1.5B is chosen.
MIN_DECODE_TOK_S = 7.0
#: The slowest prefill (tokens/s) at which the 1.5B is chosen.
MIN_PREFILL_TOK_S = 25.0
#: The remembered best speeds, in the model cache.
SPEED_MEMORY_FILE = "mt-speed.json"

_TEXT = (
    "The committee met on Tuesday to discuss the new budget, and most members agreed that "
    "schools and hospitals should receive more money next year."
)


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


def probe_text() -> str:
    """The English sentence whose tokens the probe feeds (a translation prompt's kind of text)."""
    return _TEXT
