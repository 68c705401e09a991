"""A whole audio file cut at pauses into engine windows, and the windows' texts joined again.

Whisper reads at most 30 s at a time, so a longer file must be cut; a cut inside a word
loses it, so cuts go where the VAD hears a pause. The plan, from the file's speech
probabilities (one per VAD frame):

1. Speech regions: frames at or above `threshold` start speech, and it lasts until the
   probability falls below `threshold - 0.15` (Silero's own hysteresis); gaps shorter than
   `min_silence_s` do not end a region, regions shorter than `min_speech_s` are dropped,
   and each keeps `pad_s` of context on either side (never past the middle of a gap).
2. A region longer than a window is split at its least likely frame in the second half
   of the window (a breath or a short pause).
3. Regions are packed greedily into windows of at most `max_window_s`, in order. Windows
   never overlap, so their texts are joined without deduplication. Audio outside every
   region (silence, noise) is not transcribed: on silence Whisper invents text.

The windows' texts are joined in order (`join_texts`); from where the engine says each word
starts, their words (`timed_words`) and sentences (`sentences`) are timed in the file.

Pure: no models, no I/O; the caller runs the VAD and the engine.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.languages import word_joiner


@dataclass(frozen=True)
class WindowPlan:
    """How to find the speech in a file and cut it."""

    max_window_s: float = 28.0
    threshold: float = 0.5
    min_silence_s: float = 0.3
    min_speech_s: float = 0.25
    pad_s: float = 0.2


@dataclass(frozen=True)
class Window:
    """Samples [start, end) of the file, sent to the engine as one request."""

    start: int
    end: int
    #: The speech regions it holds, in samples of the file (`audio.levels` evens them out).
    regions: tuple[tuple[int, int], ...] = ()

    def seconds(self, rate: int) -> tuple[float, float]:
        return self.start / rate, self.end / rate


def speech_regions(
    probs: Sequence[float], hop: int, total: int, rate: int, plan: WindowPlan
) -> list[tuple[int, int]]:
    """The padded speech regions, in samples, of a file of `total` samples whose frame `i`
    (samples [i*hop, (i+1)*hop)) has speech probability `probs[i]`."""
    low = max(plan.threshold - 0.15, 0.01)
    min_silence = max(1, round(plan.min_silence_s * rate / hop))
    raw: list[list[int]] = []  # frame ranges [first, last + 1)
    speaking = False
    for i, p in enumerate(probs):
        if p >= plan.threshold:
            if not speaking and not (raw and i - raw[-1][1] < min_silence):
                raw.append([i, i + 1])  # a short gap does not end the region before
            speaking = True
            raw[-1][1] = i + 1
        elif speaking and p >= low:
            raw[-1][1] = i + 1
        else:
            speaking = False
    min_frames = plan.min_speech_s * rate / hop
    kept = [(a * hop, min(b * hop, total)) for a, b in raw if b - a >= min_frames]
    pad = int(plan.pad_s * rate)
    padded: list[tuple[int, int]] = []
    for n, (a, b) in enumerate(kept):
        # Context on either side, but never past the middle of the gap to a neighbour.
        lo = max(a - pad, (kept[n - 1][1] + a) // 2 if n else 0)
        hi = min(b + pad, (b + kept[n + 1][0]) // 2 if n + 1 < len(kept) else total)
        padded.append((lo, hi))
    return padded


def _split_long(
    region: tuple[int, int], probs: Sequence[float], hop: int, limit: int
) -> list[tuple[int, int]]:
    """`region` in pieces of at most `limit` samples, each cut at the least likely frame of
    the second half of what may still go into the piece."""
    start, end = region
    pieces = []
    while end - start > limit:
        first = (start + limit // 2) // hop
        last = max(first + 1, (start + limit) // hop)
        candidates = range(first, min(last, len(probs)))
        cut_frame = min(candidates, key=lambda i: (probs[i], -i)) if candidates else last
        cut = min(max(cut_frame * hop + hop // 2, start + 1), start + limit)
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces


def plan_windows(
    probs: Sequence[float], hop: int, total: int, rate: int, plan: WindowPlan | None = None
) -> list[Window]:
    """The file's windows, in order: speech regions packed into at most `max_window_s` each."""
    plan = plan or WindowPlan()
    limit = int(plan.max_window_s * rate)
    regions: list[tuple[int, int]] = []
    for region in speech_regions(probs, hop, total, rate, plan):
        regions += _split_long(region, probs, hop, limit)
    windows: list[Window] = []
    for start, end in regions:
        if windows and end - windows[-1].start <= limit:
            last = windows[-1]
            windows[-1] = Window(last.start, end, (*last.regions, (start, end)))
        else:
            windows.append(Window(start, end, ((start, end),)))
    return windows


def join_texts(texts: Sequence[str]) -> str:
    """The windows' texts (stripped, empty ones skipped) as one transcript, in order."""
    out = ""
    for text in texts:
        piece = text.strip()
        if piece:
            out += word_joiner(out, piece) + piece
    return out


#: Stripped from either end of a timed word, as OpenAI's `words` carry no punctuation.
_PUNCTUATION = "\"'“”‘’¿¡([{)]}.,!?;:。，！？、…"


@dataclass(frozen=True)
class TimedWord:
    word: str
    start: float
    end: float


def timed_words(text: str, starts: Sequence[tuple[int, float]], offset: float, end: float) -> list[TimedWord]:
    """The words of a window's `text`, timed in the file, from where the engine says words
    start (`(chars into text, seconds into the window)`, in order).

    A word lasts until the next word starts (Whisper's own rule for word ends), the last one
    until the window's end (`end`, in the file). Where the engine gave one start for several
    words, they share its span in proportion to their characters.
    """
    marks = [(c, s) for c, s in starts if 0 <= c < len(text)]
    if not marks:
        return []
    if marks[0][0] > 0:
        marks.insert(0, (0, marks[0][1]))
    out: list[TimedWord] = []
    for n, (chars, seconds) in enumerate(marks):
        stop = marks[n + 1][0] if n + 1 < len(marks) else len(text)
        begin = offset + seconds
        finish = offset + marks[n + 1][1] if n + 1 < len(marks) else end
        finish = max(finish, begin)
        pieces = text[chars:stop].split()
        total = sum(len(p) for p in pieces) or 1
        at = begin
        for piece in pieces:
            span = (finish - begin) * len(piece) / total
            word = piece.strip(_PUNCTUATION)
            if word:
                out.append(TimedWord(word, round(at, 3), round(at + span, 3)))
            at += span
    return out


#: What ends a sentence, and a clause, for cutting a window's text into timed segments.
_SENTENCE_ENDS = tuple(".?!。？！")
_CLAUSE_ENDS = (*_SENTENCE_ENDS, *",;:，；：、")
#: A segment longer than this is cut at its clauses too, none shorter than `_MIN_CLAUSE_S`.
MAX_SEGMENT_S = 12.0
_MIN_CLAUSE_S = 3.0


#: Words whose full stop does not end a sentence ("Mr. Quilter").
_ABBREVIATIONS = frozenset("mr mrs ms dr prof st jr sr vs e.g i.e vol fig mt ft lt rev".split())  # noqa: SIM905


def _abbreviation(word: str) -> bool:
    """`word` ends in a full stop that is not a sentence's: a title, "e.g.", an initial ("J.")."""
    if not word.endswith("."):
        return False
    bare = word.rstrip(".").lstrip("\"'“‘(").lower()
    return bare in _ABBREVIATIONS or (len(bare) == 1 and bare.isalpha()) or "." in bare


@dataclass(frozen=True)
class TimedText:
    text: str
    start: float
    end: float


def sentences(
    text: str, starts: Sequence[tuple[int, float]], offset: float, end: float, max_s: float = MAX_SEGMENT_S
) -> list[TimedText]:
    """A window's `text` cut into sentences (and long sentences at their clauses), timed in the
    file from the engine's word starts as `timed_words` times words: a piece runs from its first
    word's start to the next piece's. Without word starts: the window's text as one piece."""
    marks = [(c, s) for c, s in starts if 0 <= c < len(text)]
    if not marks:
        return [TimedText(text, offset, end)] if text.strip() else []
    if marks[0][0] > 0:
        marks.insert(0, (0, marks[0][1]))

    def ends_before(n: int, ends: tuple[str, ...]) -> bool:
        return text[: marks[n][0]].rstrip().endswith(ends)

    def sentence_before(n: int) -> bool:
        last = text[: marks[n][0]].split()[-1:] or [""]
        return ends_before(n, _SENTENCE_ENDS) and not _abbreviation(last[0])

    cuts = [0] + [n for n in range(1, len(marks)) if sentence_before(n)] + [len(marks)]
    pieces: list[int] = []
    for first, stop in itertools.pairwise(cuts):
        pieces.append(first)
        finish = marks[stop][1] if stop < len(marks) else end - offset
        if finish - marks[first][1] <= max_s:
            continue
        since = marks[first][1]
        for n in range(first + 1, stop):
            if ends_before(n, _CLAUSE_ENDS) and marks[n][1] - since >= _MIN_CLAUSE_S:
                pieces.append(n)
                since = marks[n][1]
    out = []
    for i, first in enumerate(pieces):
        nxt = pieces[i + 1] if i + 1 < len(pieces) else None
        chunk = text[marks[first][0] : marks[nxt][0] if nxt is not None else len(text)]
        stop_s = offset + marks[nxt][1] if nxt is not None else end
        begin = offset + marks[first][1]
        if chunk.strip():
            out.append(TimedText(chunk, round(begin, 3), round(max(stop_s, begin), 3)))
    return out
