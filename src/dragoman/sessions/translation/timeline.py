"""Where a segment's first translated text waits: its milestones on the input clock.

The first text of a segment follows its speech by the sum of several waits: the first
ASR step (a chunk of audio, then its decode), the steps until some source words are
stable enough to commit against, the MT lane, and the draft itself. The translation
session marks each milestone here (the input clock, in ms: audio arrives at real-time
pace, so a gap on it is a gap in time, within one 200 ms frame); the interpreter
service logs them when the session ends, for `bench/interpreter.py`'s diagnosis. Two of
the waits are the server's metrics as well, taken here once a segment: its first text's
lag after its speech began, and its final translation's after its speech ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dragoman.sessions.speech import events as speech

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
    #: Where each segment's speech began and ended (input clock, ms), for its lags.
    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)

    def mark(self, item_id: str, milestone: str, clock_ms: float) -> None:
        """The first time `item_id` reaches `milestone` (later ones are ignored)."""
        self.segments.setdefault(item_id, {}).setdefault(milestone, clock_ms)

    def heard(self, event: speech.FrontEvent, clock_ms: float) -> None:
        """The milestones a speech front's event marks (`clock_ms`: the input clock now)."""
        if isinstance(event, speech.Partial):
            self.mark(event.item_id, "partial", clock_ms)
            if event.stable_chars:
                self.mark(event.item_id, "words", clock_ms)
        elif isinstance(event, speech.Committed):
            self.ends.setdefault(event.item_id, clock_ms)
            self.mark(event.item_id, "committed", clock_ms)
        elif isinstance(event, speech.SpeechStarted):
            self.starts[event.item_id] = float(event.audio_start_ms)
            self.mark(event.item_id, "speech", float(event.audio_start_ms))
        elif isinstance(event, speech.SpeechStopped):
            self.ends[event.item_id] = float(event.audio_end_ms)
            self.mark(event.item_id, "speech_end", float(event.audio_end_ms))
        elif isinstance(event, speech.Completed):
            self.mark(event.item_id, "transcribed", clock_ms)
        elif isinstance(event, speech.Failed):
            self.starts.pop(event.item_id, None)
            self.ends.pop(event.item_id, None)

    def text(self, item_id: str, clock_ms: float) -> float | None:
        """Translated text of the segment went out: the first time, its lag in seconds."""
        self.mark(item_id, "text", clock_ms)
        start = self.starts.pop(item_id, None)
        return None if start is None else max(0.0, clock_ms - start) / 1000

    def final(self, item_id: str, clock_ms: float) -> float | None:
        """The segment's final translation went out: its end lag in seconds, if its end is known."""
        self.mark(item_id, "final", clock_ms)
        self.starts.pop(item_id, None)
        end = self.ends.pop(item_id, None)
        return None if end is None else max(0.0, clock_ms - end) / 1000

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
