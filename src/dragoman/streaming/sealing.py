"""Sealing: bounding the re-decode window of a long item.

The re-decode algorithm transcribes the whole item again at every step, so an item's
work grows with the square of its length. Sealing stops that: once the head of the
hypothesis has been stable for a step (it was forced as the decoder prefix, so it can
no longer change) and ends at a pause in the audio, that head becomes final text, and
the next step's window starts at the pause. The sealed text then goes to the decoder
as its previous-text prompt, and the rest of the stable prefix stays forced, so the
client sees one transcript whose deltas never take anything back.

Where the words are in the audio comes from the engine (`StepResult.words`, Whisper's
cross-attention alignment); where exactly the pause is comes from the audio itself:
the quietest stretch around the start of the next word, measured against the speech
level of the window. A cut needs that stretch to be quiet enough (a micro-pause);
once the window reaches `max_window_seconds`, the quietest word boundary is cut even
without one, so a window never grows past the bound while it has words to cut at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dragoman.audio.levels import frame_levels
from dragoman.engines.asr.base import WordStart

#: Frames of the energy measure (20 ms at 16 kHz).
_FRAME_SECONDS = 0.02
#: The speech level: this percentile of the window's frame energies.
_SPEECH_PERCENTILE = 90
#: A pause is looked for this far after the previous word's start at the earliest, so that
#: a cut does not take the second half of that word into the next window.
_SHORTEST_WORD_SECONDS = 0.25


@dataclass(frozen=True)
class SealPolicy:
    #: The longest window re-decoded before a cut is forced (0: never seal).
    max_window_seconds: float = 10.0
    #: No cut is looked for in a window shorter than this (a short item is never cut).
    min_window_seconds: float = 5.0
    #: A pause is a stretch this long …
    pause_seconds: float = 0.16
    #: … at least this far (dB) below the window's speech level.
    quiet_db: float = -25.0
    #: Audio the window keeps after a cut, so the next step has a word or so to re-decode.
    keep_seconds: float = 1.0
    #: How far before a word's aligned start a pause may lie (cross-attention timing is
    #: coarse, and a pause is before the word), and how far after.
    search_before_seconds: float = 0.6
    search_after_seconds: float = 0.12

    @classmethod
    def for_window(cls, max_window_seconds: float) -> SealPolicy:
        return cls(max_window_seconds=max_window_seconds, min_window_seconds=max_window_seconds / 2)

    @property
    def enabled(self) -> bool:
        return self.max_window_seconds > 0


@dataclass(frozen=True)
class Seal:
    """Seal `text[:chars]` as final; the next window starts `samples` into this one's audio."""

    chars: int
    samples: int


@dataclass(frozen=True)
class _Boundary:
    chars: int
    samples: int
    #: The cut's energy relative to the speech level, in dB (lower is quieter).
    level_db: float


def quietest_cut(
    levels: npt.NDArray[np.float64], frame: int, lo: int, hi: int, run: int
) -> tuple[int, float] | None:
    """The centre (in samples) and mean level of the quietest `run` frames within [lo, hi) frames."""
    lo, hi = max(0, lo), min(len(levels), hi)
    if hi - lo < run or run < 1:
        return None
    # Mean of power, not of dB: one loud frame in the run must count as loud.
    power = 10.0 ** (levels[lo:hi] / 10.0)
    sums = np.convolve(power, np.ones(run), mode="valid") / run
    best = int(np.argmin(sums))
    centre = (lo + best) * frame + run * frame // 2
    return centre, float(10.0 * np.log10(sums[best] + 1e-10))


def choose_seal(
    text: str,
    stable_chars: int,
    words: Sequence[WordStart],
    audio: npt.NDArray[np.float32],
    rate: int,
    policy: SealPolicy,
) -> Seal | None:
    """Where to seal a window's hypothesis `text`, or None to keep the window whole.

    `stable_chars`: how much of `text` the step had forced, and so had been stable for a
    step already; only a cut inside it is sealed. `words`: where each word of `text`
    starts, in chars and in seconds of `audio` (the window's audio), in order; the first
    word's (chars 0) bounds the search for the first pause.
    """
    seconds = len(audio) / rate
    if not policy.enabled or seconds < policy.min_window_seconds:
        return None
    keep = round(policy.keep_seconds * rate)
    if not text.strip():
        # Nothing said yet: past the bound, the window drops all but its last `keep` audio.
        if seconds >= policy.max_window_seconds and len(audio) > keep:
            return Seal(chars=0, samples=len(audio) - keep)
        return None
    levels, frame = frame_levels(audio, rate, _FRAME_SECONDS)
    if not len(levels):
        return None
    speech = float(np.percentile(levels, _SPEECH_PERCENTILE))
    run = max(1, round(policy.pause_seconds / _FRAME_SECONDS))
    boundaries: list[_Boundary] = []
    previous = 0.0  # the previous word's start: a pause lies after it
    for word in words:
        earliest, previous = previous + _SHORTEST_WORD_SECONDS, word.seconds
        if word.chars <= 0 or word.chars > stable_chars or not text[: word.chars].strip():
            continue
        start = round(word.seconds * rate)
        lo = max(start - round(policy.search_before_seconds * rate), round(earliest * rate)) // frame
        hi = (start + round(policy.search_after_seconds * rate)) // frame
        found = quietest_cut(levels, frame, lo, hi, run)
        if found is None:
            continue
        cut, level = found
        if 0 < cut <= len(audio) - keep:
            boundaries.append(_Boundary(word.chars, cut, level - speech))
    if not boundaries:
        return None
    pauses = [b for b in boundaries if b.level_db <= policy.quiet_db]
    if pauses:
        best = max(pauses, key=lambda b: b.chars)
    elif seconds >= policy.max_window_seconds:
        best = min(boundaries, key=lambda b: b.level_db)
    else:
        return None
    return Seal(chars=best.chars, samples=best.samples)
