"""Before a turn opens: the candidate turn, and the audio that may pad its start.

Speech outside a turn starts a candidate turn, which begins `prefix_padding_ms` before its first
speech window (less when less audio came since the last turn or reset) and holds its audio, so
none is lost. Once it holds `min_speech_ms` of active speech it is a turn (`streaming/turns.py`
announces it); once it has been quiet for as long as would first end a turn, it is dropped, and
its audio, outside turns, may pad the next one.

A dropped candidate with at least half the gate of active speech (as much as resumes a
soft-ended turn) is recalled by speech that starts within that much quiet again: the new
candidate begins where the dropped one began, so a short first word set off by a pause is not
lost ("However, | due to the slow ...": Silero heard 0.35 s of "However," then 0.5 s of quiet,
and the turn began 0.3 s before "due"). A click is too short to be recalled, and recalled
speech does not count toward the gate: two coughs still open no turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from dragoman.streaming.recent_audio import RecentAudio


@dataclass
class SpeechRun:
    """Speech not yet past its gate: how much of it is active, and since when it is quiet."""

    active: int = 0
    quiet_since: int | None = None

    def add(self, speech: bool, start: int, length: int) -> None:
        if speech:
            self.active += length
            self.quiet_since = None
        elif self.quiet_since is None:
            self.quiet_since = start

    def quiet(self, now: int) -> int:
        return 0 if self.quiet_since is None else now - self.quiet_since


@dataclass
class Candidate:
    """A turn not yet announced: where it will begin, and its audio so far (copies)."""

    first: int
    held: list[NDArray[np.float32]]
    run: SpeechRun = field(default_factory=SpeechRun)


@dataclass
class Recall:
    """A dropped candidate that speech may still take up: where it began, its audio and the
    quiet since (copies), and the position past which it is forgotten."""

    first: int
    held: list[NDArray[np.float32]]
    until: int


class TurnOnset:
    """Lengths and positions in samples on the segmenter's timeline: the padding, the speech
    gate, and the quiet that drops a candidate."""

    def __init__(self, padding: int, gate: int, silence: int) -> None:
        self._gate = gate
        self._recall_gate = gate // 2
        self._silence = silence
        # Up to `padding` of the latest audio outside a turn (and outside any candidate).
        self._ring = RecentAudio(padding)
        self.candidate: Candidate | None = None
        self._recall: Recall | None = None

    @property
    def pending(self) -> bool:
        """A candidate turn may still open over the audio held (a candidate, or a recall)."""
        return self.candidate is not None or self._recall is not None

    def empty(self) -> bool:
        return self.candidate is None and self._recall is None and not self._ring

    def reset(self) -> None:
        self._ring.clear()
        self.candidate = None
        self._recall = None

    def step(self, window: NDArray[np.float32], start: int, end: int, speech: bool) -> bool:
        """Start, grow or drop the candidate turn with a window [start, end); True once the
        candidate has passed its gate (`take` it then)."""
        candidate = self.candidate
        if candidate is None:
            recall = self._recall
            if recall is not None and start >= recall.until:
                recall = self._recall = None
            if not speech:
                # One copy of the window, for the padding ring and a recall alike (never written).
                kept = window.copy()
                self._ring.add(kept)
                if recall is not None:
                    recall.held.append(kept)
                return False
            if recall is not None:
                candidate = Candidate(recall.first, recall.held)
            else:
                padding = self._ring.latest()
                candidate = Candidate(start - len(padding), [padding])
            self.candidate, self._recall = candidate, None
            self._ring.clear()
        candidate.held.append(window.copy())
        candidate.run.add(speech, start, len(window))
        if candidate.run.active >= self._gate:
            return True
        if candidate.run.quiet(end) >= self._silence:
            # Too little speech before the quiet that would have ended it: no turn. Its audio
            # is outside turns, and may be the next turn's padding, or the start of a turn
            # that speech opens within as much quiet again.
            self.candidate = None
            if candidate.run.active >= self._recall_gate:
                self._recall = Recall(candidate.first, list(candidate.held), end + self._silence)
            for piece in candidate.held:  # copies already
                self._ring.add(piece)
        return False

    def take(self) -> Candidate:
        """The candidate, which is now a turn."""
        candidate = self.candidate
        assert candidate is not None
        self.candidate = self._recall = None
        return candidate
