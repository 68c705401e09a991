"""TTS round trip: speak FLORES sentences with each voice, transcribe them back: `python -m bench.tts_roundtrip`.

    --voices hibari,joe,espeak-en     catalog voice names (default: the three English voices);
                                      e.g. kokoro-it-sara,espeak-it,kokoro-zh-xiaobei,espeak-zh
    --sentences 20                    FLORES-200 devtest sentences per language (../shared/eval)
    --max-chars 200                   skip longer sentences (Whisper's window is 30 s)
    --asr-model whisper-base          the project's STT that scores the speech
    --speeds 1.0                      speaking rates to measure (e.g. 1.0,1.15,1.3: what a
                                      faster voice costs in intelligibility); only 1.0 is recorded

Each voice speaks the FLORES sentences of its own language (en, de, it or zh: the same
sentences in each), through the shared `Speaker` (the server's path, resampled to 16 kHz
PCM16); the project's Whisper, the language fixed to the voice's, transcribes them back
(bench/listener.py, which converts Mandarin to simplified characters, so that the CER scores
the voice, not the script). The score is WER over normalised text (dragoman.tools.wer), CER for
Chinese, which has no spaces. RTF is synthesis time over audio time; time to first chunk is
from the call to the first PCM bytes. Backends use one onnxruntime thread each, the TTS
settings' default outside the server. Progress to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench import results
from bench.listener import load_listener, transcribe
from bench.report import log, percentile, table
from dragoman.config import TTSSettings, load_settings
from dragoman.cpu import cpu_info
from dragoman.engines.asr.base import ASREngine
from dragoman.engines.tts.speaker import Speaker
from dragoman.engines.workers import CancelToken
from dragoman.logs import configure as configure_logs
from dragoman.tools import eval_set
from dragoman.tools.wer import wer

RATE = 16_000
FLORES = eval_set.eval_path(eval_set.FLORES)
#: ISO 639-1 -> the FLORES column of that language.
COLUMNS = {"en": "eng_Latn", "de": "deu_Latn", "it": "ita_Latn", "zh": "zho_Hans"}


def flores_sentences(language: str, n: int, max_chars: int) -> list[str]:
    """The first `n` FLORES devtest sentences in `language` among the lines that are at most
    `max_chars` characters long in every language, so that each language speaks the same lines."""
    if language not in COLUMNS:
        raise SystemExit(f"no FLORES sentences in {language!r}; languages: {', '.join(COLUMNS)}")
    with FLORES.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    short = [row for row in rows if all(len(row[c].strip()) <= max_chars for c in COLUMNS.values())]
    return [row[COLUMNS[language]].strip() for row in short[:n]]


@dataclass
class VoiceRun:
    voice: str
    backend: str
    language: str
    load_seconds: float
    sentences: list[str]
    speed: float = 1.0
    hypotheses: list[str] = field(default_factory=list)
    synth_seconds: list[float] = field(default_factory=list)
    audio_seconds: list[float] = field(default_factory=list)
    first_chunk: list[float] = field(default_factory=list)


def speak(speaker: Speaker, voice: str, text: str, speed: float = 1.0) -> tuple[bytes, float, float]:
    """PCM16 at 16 kHz, seconds to the first chunk, seconds in all."""
    chunks: list[bytes] = []
    first: list[float] = []
    started = time.perf_counter()

    def emit(data: bytes) -> None:
        if not first:
            first.append(time.perf_counter() - started)
        chunks.append(data)

    speaker.synthesize(voice, text, speed, CancelToken(), emit, RATE)
    total = time.perf_counter() - started
    return b"".join(chunks), first[0] if first else float("nan"), total


def run_voice(
    speaker: Speaker, asr: ASREngine, voice: str, n: int, max_chars: int, speed: float = 1.0
) -> VoiceRun:
    entry = speaker.catalog.voice_for(voice)
    sentences = flores_sentences(entry.language, n, max_chars)
    began = time.perf_counter()
    speaker.engine(entry.backend)  # load and warm outside the timings
    run = VoiceRun(voice, entry.backend, entry.language, time.perf_counter() - began, sentences, speed)
    for text in sentences:
        pcm, first, total = speak(speaker, voice, text, speed)
        run.first_chunk.append(first)
        run.synth_seconds.append(total)
        run.audio_seconds.append(len(pcm) / 2 / RATE)
        run.hypotheses.append(transcribe(asr, pcm, entry.language))
    log(
        f"{voice} at speed {speed}: {sum(run.audio_seconds):.0f} s of speech in {sum(run.synth_seconds):.1f} s"
    )
    return run


def metric_name(language: str) -> str:
    return "CER" if language in ("zh", "ja") else "WER"


def score(run: VoiceRun) -> float:
    """The round trip's WER (CER for Chinese), a fraction."""
    return wer(run.sentences, run.hypotheses, run.language)


def error_rate(run: VoiceRun) -> str:
    """WER, or CER for Chinese, in per cent with its name."""
    return f"{metric_name(run.language)} {100 * score(run):.1f} %"


def record_best(runs: list[VoiceRun], asr_model: str) -> None:
    """One result per language: its best voice's round trip, the others' in the conditions."""
    for language in sorted({run.language for run in runs}):
        ranked = sorted((run for run in runs if run.language == language), key=score)
        best = ranked[0]
        others = ", ".join(f"{run.voice} {100 * score(run):.1f} %" for run in ranked[1:])
        results.record(
            "tts_roundtrip",
            "speech output quality",
            f"round-trip {metric_name(language)} of the best {language} voice through {asr_model}",
            100 * score(best),
            "%",
            conditions=f"{best.voice}; {others or 'no other voice measured'}; "
            f"{len(best.sentences)} FLORES-200 devtest sentences",
        )


def report(runs: list[VoiceRun], asr_model: str) -> None:
    languages = sorted({run.language for run in runs})
    print(f"## TTS round trip ({', '.join(languages)})\n")
    load = os.getloadavg()
    longest = max(len(s) for run in runs for s in run.sentences)
    print(
        f"{len(runs[0].sentences)} FLORES-200 devtest sentences per language (the same sentences in each, "
        f"≤ {longest} characters), each spoken through the `Speaker` at 16 kHz and transcribed by "
        f"{asr_model} (int8, the voice's language fixed). "
        f"{cpu_info().describe()}; load average at start {load[0]:.2f}; Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}.\n"
    )
    rows: list[list[object]] = []
    for run in runs:
        audio = sum(run.audio_seconds)
        rows.append(
            [
                run.voice,
                run.speed,
                run.backend,
                run.language,
                error_rate(run),
                sum(run.synth_seconds) / audio if audio else float("nan"),
                1000 * percentile(run.first_chunk, 50),
                1000 * percentile(run.first_chunk, 95),
                audio / len(run.sentences),
                run.load_seconds,
            ]
        )
    print(
        table(
            [
                "voice",
                "speed",
                "backend",
                "language",
                "round trip",
                "RTF",
                "first chunk p50 ms",
                "first chunk p95 ms",
                "s of audio per sentence",
                "load + warm-up s",
            ],
            rows,
        )
    )
    print("\n<details><summary>worst sentences per voice</summary>\n")
    for run in runs:
        scored = sorted(
            (
                (wer([ref], [hyp], run.language), ref, hyp)
                for ref, hyp in zip(run.sentences, run.hypotheses, strict=True)
            ),
            reverse=True,
        )[:3]
        for score, ref, hyp in scored:
            print(f"- {run.voice} at {run.speed} ({100 * score:.0f} %): {ref!r} -> {hyp!r}")
    print("\n</details>")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tts_roundtrip", description=__doc__.split("\n")[0])
    parser.add_argument("--voices", default="hibari,joe,espeak-en")
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--max-chars", type=int, default=200)
    parser.add_argument("--asr-model", default="whisper-base")
    parser.add_argument("--speeds", default="1.0", help="speaking rates, e.g. 1.0,1.15,1.3")
    args = parser.parse_args(argv)
    configure_logs(level="warning")
    settings = load_settings()
    log(f"{args.sentences} sentences per voice; loading {args.asr_model}")
    asr = load_listener(args.asr_model, settings.cache_dir)
    speaker = Speaker(TTSSettings(), settings.cache_dir)
    speeds = [float(speed) for speed in args.speeds.split(",")]
    runs = [
        run_voice(speaker, asr, voice, args.sentences, args.max_chars, speed)
        for voice in args.voices.split(",")
        for speed in speeds
    ]
    report(runs, args.asr_model)
    # The goal is the voices as they speak by default.
    record_best([run for run in runs if run.speed == 1.0], args.asr_model)
    speaker.close()
    asr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
