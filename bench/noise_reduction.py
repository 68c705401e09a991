"""What input noise reduction does to what the model hears: WER on noisy speech, with and without.

OpenAI's `audio.input.noise_reduction` "filters audio added to the input audio buffer before it
is sent to VAD and the model"; dragoman's filter is `streaming/noise_reduction.py`, applied by
the speech front of every session. This benchmark takes the English recordings of the eval set
(`../shared/eval/asr.tsv`, at most `--clips`, each under 30 s), adds stationary noise (white, and
pink: its power falling with frequency, closer to fans and road noise) at a signal-to-noise
ratio of 10, 5 and 0 dB (seeded: the same noise for each setting), runs each mix through the
filter as a session would (200 ms appends at 16 kHz), and has whisper-base transcribe every clip
whole. It prints the WER of each noise, ratio and setting (off, near_field, far_field) and
records the ratio of near_field's WER to no filter's, on clean and on noisy speech.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import soundfile as sf
import soxr

from bench import results
from bench.listener import load_listener
from bench.report import log, table
from dragoman.config import load_settings
from dragoman.cpu import cpu_info
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.logs import configure as configure_logs
from dragoman.streaming.noise_reduction import PROFILES, NoiseSuppressor
from dragoman.tools import eval_set
from dragoman.tools.wer import wer

RATE = 16_000
APPEND = RATE // 5
SETTINGS = ("off", *PROFILES)
NOISES = ("white", "pink")
SNRS_DB = (10, 5, 0)
MAX_SECONDS = 29.0


def clips(limit: int) -> list[tuple[np.ndarray, str]]:
    """English recordings of the eval set (16 kHz mono) with their reference transcripts."""
    out = []
    for row in eval_set.asr_rows("en"):
        if row["channel"] or float(row["duration_s"]) > MAX_SECONDS:
            continue
        data, rate = sf.read(eval_set.eval_path(row["file"]), dtype="float32", always_2d=True)
        mono = data[:, 0] if rate == RATE else soxr.resample(data[:, 0], rate, RATE)
        out.append((np.ascontiguousarray(mono, dtype=np.float32), row["reference_text"]))
        if len(out) == limit:
            break
    return out


def noise(kind: str, samples: int, rng: np.random.Generator) -> np.ndarray:
    white = rng.standard_normal(samples)
    if kind == "white":
        return white
    spectrum = np.fft.rfft(white)
    spectrum /= np.sqrt(np.arange(1, len(spectrum) + 1))  # power ~ 1/f
    return np.asarray(np.fft.irfft(spectrum, samples), dtype=np.float64)


def mixed(speech: np.ndarray, kind: str, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    hiss = noise(kind, len(speech), rng)
    gain = float(np.sqrt(np.mean(speech**2) / np.mean(hiss**2) / 10 ** (snr_db / 10)))
    return np.asarray(speech + gain * hiss, dtype=np.float32)


def filtered(audio: np.ndarray, setting: str) -> np.ndarray:
    """`audio` through the filter in 200 ms appends, realigned for its two hops of delay."""
    if setting == "off":
        return audio
    suppressor = NoiseSuppressor(RATE, setting)
    out = [suppressor.process(audio[i : i + APPEND]) for i in range(0, len(audio), APPEND)]
    out.append(suppressor.process(np.zeros(2 * suppressor.hop, dtype=np.float32)))
    return np.concatenate(out)[2 * suppressor.hop : 2 * suppressor.hop + len(audio)]


def heard(asr: ASREngine, audios: Sequence[np.ndarray]) -> list[str]:
    texts = []
    for result in asr.transcribe_batch([StepRequest(a, language="en") for a in audios]):
        if not isinstance(result, StepResult):
            raise result
        texts.append(result.text)
    return texts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.noise_reduction", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--clips", type=int, default=12)
    parser.add_argument("--asr-model", default="whisper-base")
    args = parser.parse_args(argv)
    configure_logs(level="warning")
    asr = load_listener(args.asr_model, load_settings().cache_dir)
    data = clips(args.clips)
    refs = [ref for _, ref in data]
    log(f"{len(data)} English clips; {args.asr_model}; {cpu_info().describe()}")
    rows: list[list[object]] = []
    scores: dict[tuple[str, float | None, str], float] = {}
    conditions: list[tuple[str, float | None]] = [("none", None)] + [(k, s) for k in NOISES for s in SNRS_DB]
    for kind, snr in conditions:
        rng = np.random.default_rng(7)
        inputs = [a if snr is None else mixed(a, kind, snr, rng) for a, _ in data]
        row: list[object] = [kind, "clean" if snr is None else f"{snr} dB"]
        for setting in SETTINGS:
            score = wer(refs, heard(asr, [filtered(a, setting) for a in inputs]))
            scores[kind, snr, setting] = score
            row.append(f"{100 * score:.1f}")
        rows.append(row)
        log(f"{kind} {row[1]}: " + ", ".join(f"{s} {c}" for s, c in zip(SETTINGS, row[2:], strict=True)))
    print(f"## Input noise reduction: {args.asr_model} WER %, {len(data)} English eval clips\n")
    print(table(["noise", "SNR", *SETTINGS], rows))
    noisy = [(k, s) for k, s in conditions if s is not None]
    clean_ratio = scores["none", None, "near_field"] / max(scores["none", None, "off"], 1e-9)
    noisy_ratio = float(np.mean([scores[k, s, "near_field"] / scores[k, s, "off"] for k, s in noisy]))
    shared = f"{len(data)} English eval clips, {args.asr_model}; white and pink noise at 10, 5, 0 dB SNR"
    results.record(
        "noise_reduction",
        "input noise reduction",
        f"WER with near_field / without, noisy speech ({args.asr_model})",
        noisy_ratio,
        "×",
        conditions=shared,
    )
    results.record(
        "noise_reduction",
        "input noise reduction",
        f"WER with near_field / without, clean speech ({args.asr_model})",
        clean_ratio,
        "×",
        conditions=shared,
    )
    asr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
