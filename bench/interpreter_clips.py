"""The interpreter benchmark's source speech: FLEURS clips with FLORES references, and FLORES
lines spoken by the project's own voices, as 24 kHz audio with where the speech begins and ends."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

from bench.agent_client import speech_bounds
from bench.audio import EVAL, RATE, EvalRow, load, synthesise
from bench.report import log
from dragoman.audio.vad import SileroModel
from dragoman.config import Settings
from dragoman.engines.tts.voices import VoiceCatalog
from dragoman.tools import eval_set

#: The wire rate: 24 kHz PCM16, as the translation session takes it.
WIRE_RATE = 24_000
LEAD_S = 0.5
#: ISO 639-1 -> the column of speech_translation.tsv with that language's FLORES line.
REFERENCE = {"en": "eng", "de": "deu", "it": "ita", "zh": "zho_Hans"}
FLORES = EVAL / eval_set.FLORES
#: ISO 639-1 -> the column of the FLORES file with that language's line.
FLORES_COLUMN = {"en": "eng_Latn", "de": "deu_Latn", "it": "ita_Latn", "zh": "zho_Hans"}
#: The speech source of the FLEURS rows, in the results' metric names only when another is meant.
FLEURS = "FLEURS"


@dataclass(frozen=True)
class Clip:
    name: str
    source: str
    reference: str
    audio: np.ndarray
    onset_s: float
    end_s: float
    #: Who spoke it: FLEURS (real speech) or the name of the voice that read a FLORES line.
    speech: str = FLEURS


def as_clip(
    name: str, source: str, reference: str, audio: np.ndarray, vad: SileroModel, speech: str = FLEURS
) -> Clip:
    """16 kHz `audio` as a clip on the wire's rate, with where Silero hears its speech begin and end."""
    onset, end = speech_bounds(vad, audio)
    wire = np.ascontiguousarray(soxr.resample(audio, RATE, WIRE_RATE), dtype=np.float32)
    return Clip(name, source, reference, wire, onset, end, speech)


def clips(direction: str, count: int, vad: SileroModel) -> list[Clip]:
    """The first `count` FLEURS clips spoken in the direction's source language that have a
    FLORES reference in its target (none: an empty list)."""
    source, target = direction.split("-")
    with (EVAL / "speech_translation.tsv").open(newline="", encoding="utf-8") as handle:
        rows = [
            r
            for r in csv.DictReader(handle, delimiter="\t")
            if r["src_lang"] == source and r["flores_devtest_line"] and r[REFERENCE[target]].strip()
        ][:count]
    out = []
    for row in rows:
        audio = load(EvalRow(row["file"], source, None, row["src_text"], duration=0.0, notes=""))
        out.append(as_clip(Path(row["file"]).stem, row["src_text"], row[REFERENCE[target]], audio, vad))
    return out


def speaker_voices(source: str, speakers: Sequence[str], settings: Settings) -> list[str]:
    """The voices that read the FLORES lines of `source`: "espeak" is espeak-ng in it, "best" the
    catalog's best voice of it; any other name is taken as a voice of that language."""
    catalog = VoiceCatalog(settings.tts.backends, settings.tts.voice)
    named = {"espeak": f"espeak-{source}", "best": catalog.for_language(source).name}
    out = [named.get(s, s) for s in speakers]
    return list(dict.fromkeys(out))


def flores_clips(direction: str, count: int, voices: Sequence[str], vad: SileroModel) -> list[Clip]:
    """The first `count` FLORES devtest lines in the direction's source language, each spoken by
    each voice, with the target's line as the reference."""
    if count <= 0 or not voices:
        return []
    source, target = direction.split("-")
    with FLORES.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[:count]
    texts = [row[FLORES_COLUMN[source]] for row in rows]
    spoken = synthesise(texts, voices, RATE)
    log(f"{direction}: {len(texts)} FLORES lines spoken by {', '.join(voices)}")
    out = []
    for voice in voices:
        for row, text in zip(rows, texts, strict=True):
            voiced = np.frombuffer(spoken[(voice, text)], dtype=np.int16).astype(np.float32) / 32768
            # A speaker draws breath first: the stream opens on silence, as a microphone's does.
            audio = np.concatenate([np.zeros(int(LEAD_S * RATE), dtype=np.float32), voiced])
            name = f"flores{row['line']}-{voice}"
            out.append(as_clip(name, text, row[FLORES_COLUMN[target]], audio, vad, speech=voice))
    return out
