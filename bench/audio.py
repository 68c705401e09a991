"""The benchmarks' audio: rows of `../shared/eval/asr.tsv`, loaded as 16 kHz mono float32.

The eval material lives outside the repository (eval/README.md: "Do not commit
copies into the project: read it from ../shared/eval/").
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dragoman.config import TTSSettings, default_cache_dir
from dragoman.engines.tts.speaker import Speaker
from dragoman.engines.workers import CancelToken
from dragoman.tools.eval_set import eval_dir
from harness.realtime_helpers import b64 as b64
from harness.realtime_helpers import load_audio

EVAL = eval_dir()
RATE = 16_000

#: Rows whose reference is not a human transcript (eval/README.md, the `notes` column):
#: en_vosk_digits (the text was inferred) and en_fw_stereo_2ch (another model's output).
WEAK_REFERENCES = ("en_vosk_digits", "en_fw_stereo_2ch", "fr_speechrecognition_dictee")

Audio = NDArray[np.float32]


@dataclass(frozen=True)
class EvalRow:
    file: str
    language: str
    channel: int | None
    reference: str
    duration: float
    notes: str

    @property
    def name(self) -> str:
        stem = Path(self.file).stem
        return stem if self.channel is None else f"{stem}[ch{self.channel}]"

    @property
    def weak(self) -> bool:
        return any(tag in self.file for tag in WEAK_REFERENCES)


@dataclass(frozen=True)
class Clip:
    """A recording to transcribe: one item, or several when it is longer than the item cap.

    A long recording is cut into equal consecutive parts no longer than the cap; each
    part is its own item and the transcripts are joined in order before scoring.
    """

    row: EvalRow
    parts: tuple[Audio, ...]
    rate: int = RATE

    @property
    def seconds(self) -> float:
        return sum(len(p) for p in self.parts) / self.rate


def eval_rows(language: str | None = None) -> list[EvalRow]:
    with (EVAL / "asr.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [
        EvalRow(
            file=row["file"],
            language=row["language"],
            channel=int(row["channel"]) if row["channel"].strip() else None,
            reference=row["reference_text"],
            duration=float(row["duration_s"]),
            notes=row["notes"],
        )
        for row in rows
        if language is None or row["language"] == language
    ]


def load(row: EvalRow, rate: int = RATE) -> Audio:
    """The row's audio (its `channel`, or the mean of all channels) as float32 mono at `rate`."""
    return np.ascontiguousarray(load_audio(row.file, rate, row.channel), dtype=np.float32)


def split(audio: Audio, cap_seconds: float, rate: int = RATE) -> tuple[Audio, ...]:
    """`audio` (at `rate`) in equal consecutive parts of at most `cap_seconds` each."""
    cap = int(cap_seconds * rate)
    count = max(1, math.ceil(len(audio) / cap))
    size = math.ceil(len(audio) / count)
    return tuple(audio[start : start + size] for start in range(0, len(audio), size))


def wer_clips(
    cap_seconds: float, *, shortest: float = 0.0, longest: float = math.inf, rate: int = RATE
) -> list[Clip]:
    """The English rows with a human reference at `rate`, shortest first, those past the cap
    split at it.

    `shortest` / `longest` keep only recordings of that many seconds (a quick subset).
    """
    rows = [
        r for r in eval_rows("en") if r.reference.strip() and not r.weak and shortest <= r.duration <= longest
    ]
    rows.sort(key=lambda r: r.duration)
    return [Clip(row, split(load(row, rate), cap_seconds, rate), rate) for row in rows]


@dataclass(frozen=True)
class SessionInput:
    """One load-test session's item: a real recording, or a window of a longer one."""

    name: str
    audio: Audio
    #: None for a window cut out of a longer recording (its words have no reference).
    reference: str | None


def session_inputs(
    clips: list[Clip], count: int, seconds: float, shortest: float = 8.0, windows: int = 3
) -> list[SessionInput]:
    """`count` items of real speech, at most `seconds` long each.

    The recordings of `shortest` to `seconds` s and consecutive `seconds`-long windows
    (at most `windows` of each) of the longer recordings, longest first; the pool
    repeats when `count` is larger.
    """
    size = int(seconds * RATE)
    whole: list[SessionInput] = []
    cut: list[SessionInput] = []
    for clip in sorted(clips, key=lambda c: -c.seconds):
        audio = np.concatenate(clip.parts)
        if len(audio) <= size:
            if clip.seconds >= shortest:
                whole.append(SessionInput(clip.row.name, audio, clip.row.reference))
            continue
        for k in range(min(windows, len(audio) // size)):
            cut.append(
                SessionInput(f"{clip.row.name}@{k * seconds:g}s", audio[k * size : (k + 1) * size], None)
            )
    pool = sorted(cut + whole, key=lambda item: -len(item.audio))
    if not pool:
        raise ValueError(f"no recording of {shortest:g} s or more")
    return [pool[i % len(pool)] for i in range(count)]


def synthesise(
    texts: Sequence[str], voices: Sequence[str], rate: int = 24_000
) -> dict[tuple[str, str], bytes]:
    """Each text spoken by each voice of the project's own TTS, as PCM16 at `rate`:
    {(voice, text): pcm}."""
    speaker = Speaker(TTSSettings(), default_cache_dir())
    out: dict[tuple[str, str], bytes] = {}
    try:
        for voice in voices:
            for text in texts:
                pcm = bytearray()
                speaker.synthesize(voice, text, 1.0, CancelToken(), pcm.extend, rate)
                out[(voice, text)] = bytes(pcm)
    finally:
        speaker.close()
    return out
