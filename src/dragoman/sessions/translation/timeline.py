"""Where a segment's first translated text waits: its milestones on the input clock.

The first text of a segment follows its speech by the sum of several waits: the first
ASR step (a chunk of audio, then its decode), the steps until some source words are
stable enough to commit against, the MT lane, and the draft itself. The translation
session marks each milestone here (the input clock, in ms: audio arrives at real-time
pace, so a gap on it is a gap in time, within one 200 ms frame); the interpreter
service logs them when the session ends, for `bench/interpreter.py`'s diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The milestones of a segment, in the order they normally come.
MILESTONES = (
    "speech",  # the VAD heard speech begin (its audio_start_ms)
    "partial",  # the first partial transcript
    "words",  # the first partial with committed (stable) source words
    "mt_job",  # the first MT draft started on the segment
    "text",  # the first committed translated text
    "speech_end",  # the VAD heard speech end
    "committed",  # the segment was committed (server_vad closed it)
    "transcribed",  # the final source transcript
    "final",  # the final translation
)


@dataclass
class Timeline:
    """Each segment's milestones, and counts over the session."""

    segments: dict[str, dict[str, float]] = field(default_factory=dict)
    #: MT drafts started, and how stale their update was when they started (input ms).
    mt_jobs: int = 0
    mt_staleness_ms: float = 0.0

    def mark(self, item_id: str, milestone: str, clock_ms: float) -> None:
        """The first time `item_id` reaches `milestone` (later ones are ignored)."""
        self.segments.setdefault(item_id, {}).setdefault(milestone, clock_ms)

    def mt_started(self, update_clock_ms: float, clock_ms: float) -> None:
        self.mt_jobs += 1
        self.mt_staleness_ms += max(0.0, clock_ms - update_clock_ms)

    def summary(self) -> dict[str, object]:
        """Per segment, each milestone as ms after its speech began (a log line's fields)."""
        rows = []
        for marks in self.segments.values():
            start = marks.get("speech")
            if start is None:
                continue
            rows.append({m: round(marks[m] - start) for m in MILESTONES[1:] if m in marks})
        mean = self.mt_staleness_ms / self.mt_jobs if self.mt_jobs else 0.0
        return {"segments": rows, "mt_jobs": self.mt_jobs, "mt_staleness_ms": round(mean)}
