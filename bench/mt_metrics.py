"""Latency of simultaneous translation: LAAL, ideal and computation-aware.

LAAL (length-adaptive average lagging, Papi et al. 2022, "Over-Generation Cannot Be
Rewarded") is Average Lagging with the oracle rate taken from the longer of the
hypothesis and the reference:

    LAAL = 1/tau * sum_{i=1..tau} (d_i - (i - 1) * |X| / max(|Y|, |Y*|))
    tau  = the first i with d_i >= |X|

with |X| the source duration in ms and d_i the delay of the i-th target unit. This is
what SimulEval's LAAL scorer computes for speech input; its computation-aware variant
feeds the same formula with "elapsed" times (delays plus the compute time that has
accumulated by then), cutoff included.

Units follow SimulEval's `--latency-unit`: whitespace words for de/it, characters for
zh/ja (spaces dropped), so the reference length is counted the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Languages written without spaces between words; latency is counted per character.
CHAR_LANGS = frozenset({"zh", "ja"})


def units(text: str, lang: str) -> list[str]:
    """The latency units of `text`: characters for zh/ja, whitespace words otherwise."""
    if lang.split("-")[0].lower() in CHAR_LANGS:
        return [ch for ch in text if not ch.isspace()]
    return text.split()


@dataclass(frozen=True)
class Emission:
    """What the client held at one moment: the committed target text and when it got it."""

    #: Source time consumed when this text was produced (the update's clock_ms): ignores compute.
    ideal_ms: float
    #: Simulated wall time at which the client received the text (stream start = 0).
    elapsed_ms: float
    #: The cumulative committed target text (for a final, the full translation).
    text: str


def unit_delays(emissions: Sequence[Emission], final_text: str, lang: str) -> tuple[list[float], list[float]]:
    """Per-unit (ideal, computation-aware) delays of `final_text`.

    A unit counts as emitted at the first emission whose units agree with the final ones
    up to and including it. Exact agreement matters for words: a committed "Kinder" that
    later grows into "Kinderschuhen" was not yet the final word, so it earns no credit
    until the text holding "Kinderschuhen" arrives. `emissions` must be in time order and
    should end with the one that delivered `final_text`; units never reached fall back to
    the last emission.
    """
    if not emissions:
        raise ValueError("no emissions")
    final_units = units(final_text, lang)
    ideal: list[float] = []
    elapsed: list[float] = []
    for emission in emissions:
        seen = units(emission.text, lang)
        # Extend the credited prefix while this emission agrees with the final units.
        while (
            len(ideal) < len(final_units)
            and len(ideal) < len(seen)
            and seen[: len(ideal) + 1] == final_units[: len(ideal) + 1]
        ):
            ideal.append(emission.ideal_ms)
            elapsed.append(emission.elapsed_ms)
    last = emissions[-1]
    while len(ideal) < len(final_units):
        ideal.append(last.ideal_ms)
        elapsed.append(last.elapsed_ms)
    return ideal, elapsed


def laal(delays: Sequence[float], source_length_ms: float, reference_length: int) -> float:
    """LAAL in ms of one sentence; `delays` are per target unit, monotone, in ms."""
    if not delays:
        raise ValueError("LAAL of an empty hypothesis is undefined")
    if source_length_ms <= 0:
        raise ValueError("source length must be positive")
    if delays[0] > source_length_ms:
        return float(delays[0])
    # ms of source per target unit on the ideal (wait-free, evenly paced) translation.
    rate = source_length_ms / max(len(delays), reference_length)
    total = 0.0
    tau = 0
    for i, d in enumerate(delays):
        total += d - i * rate
        tau = i + 1
        if d >= source_length_ms:
            break
    return total / tau


@dataclass(frozen=True)
class SentenceLatency:
    ideal_ms: float
    computation_aware_ms: float


def sentence_laal(
    emissions: Sequence[Emission],
    final_text: str,
    reference: str,
    lang: str,
    source_length_ms: float,
) -> SentenceLatency | None:
    """Both LAALs of one sentence; None when the hypothesis is empty (SimulEval skips those)."""
    ideal, elapsed = unit_delays(emissions, final_text, lang)
    if not ideal:
        return None
    ref_len = len(units(reference, lang))
    return SentenceLatency(
        ideal_ms=laal(ideal, source_length_ms, ref_len),
        computation_aware_ms=laal(elapsed, source_length_ms, ref_len),
    )
