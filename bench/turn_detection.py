"""Turn detection on real recordings: `python -m bench.turn_detection`.

    --languages en,de     only these rows of asr.tsv (default: every language)
    --calls 30            Smart Turn calls to time

Each recording is one utterance: 0.5 s of room noise, the recording, then 9 s of room noise
(more than low eagerness's 8 s max timeout). Real Silero VAD and the real Smart Turn model
segment it as server_vad (silence_duration_ms 500) and as semantic_vad at each eagerness.
Per mode: how far past the end of the speech (the last window Silero scores >= 0.5) the last
turn stops, and how many turns stopped before the speech ended (a cut: the user was not done;
at a sentence boundary inside a multi-sentence recording it is a fair one, so this is an upper
bound on mid-sentence cuts).

Progress goes to stderr, markdown tables to stdout. Audio comes from ../shared/eval (never
copied into the repo).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.audio import RATE, eval_rows, load
from bench.report import log, table
from dragoman.audio.vad import SileroModel, SileroVAD
from dragoman.cpu import cpu_info
from dragoman.engines.turn.smart_turn import SmartTurnModel
from dragoman.streaming.turns import (
    SemanticVADConfig,
    ServerVADConfig,
    SpeechStopped,
    TurnConfig,
    TurnSegmenter,
)
from dragoman.weights import resolve

LEAD_S, TAIL_S = 0.5, 9.0
MODES: tuple[tuple[str, TurnConfig], ...] = (
    ("server_vad 500 ms", ServerVADConfig()),
    ("semantic_vad auto", SemanticVADConfig()),
    ("semantic_vad high", SemanticVADConfig("high")),
    ("semantic_vad low", SemanticVADConfig("low")),
)


def room_noise(seconds: float, seed: int) -> np.ndarray:
    """A quiet noise floor (about -60 dBFS) standing in for a silent room."""
    return (0.001 * np.random.default_rng(seed).standard_normal(int(seconds * RATE))).astype(np.float32)


@dataclass
class Timed:
    """The model as the segmenter calls it, timing each call."""

    model: SmartTurnModel
    seconds: float = 0.0
    calls: int = 0

    def __call__(self, audio: np.ndarray) -> float:
        began = time.perf_counter()
        probability = self.model.completion_probability(audio)
        self.seconds += time.perf_counter() - began
        self.calls += 1
        return probability


@dataclass(frozen=True)
class Outcome:
    #: audio_end_ms of the last turn minus the end of the speech, in ms.
    end_ms: float
    #: Turns that stopped before the speech ended.
    cuts: int


def segment(config: TurnConfig, vad: SileroModel, turn: Timed, audio: np.ndarray, end_ms: int) -> Outcome:
    segmenter = TurnSegmenter(config, SileroVAD(vad), turn_model=turn)
    stops: list[int] = []
    for begin in range(0, len(audio), RATE // 10):
        ops = segmenter.push(audio[begin : begin + RATE // 10])
        stops += [op.audio_end_ms for op in ops if isinstance(op, SpeechStopped)]
    if not stops:
        return Outcome(float("nan"), 0)
    return Outcome(float(stops[-1] - end_ms), sum(stop < end_ms for stop in stops))


def speech_end_ms(vad: SileroModel, audio: np.ndarray) -> int:
    """The end of the last window Silero scores as speech (threshold 0.5), in ms."""
    stream = SileroVAD(vad)
    width = stream.window_samples
    last = 0
    for begin in range(0, len(audio) - width + 1, width):
        if stream(audio[begin : begin + width]) >= 0.5:
            last = begin + width
    return last * 1000 // RATE


def time_calls(model: SmartTurnModel, audio: np.ndarray, calls: int) -> tuple[float, float]:
    """Median and 90th percentile ms of one call on 8 s of audio."""
    model.completion_probability(audio)  # warm
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        model.completion_probability(audio)
        times.append(1000 * (time.perf_counter() - began))
    return float(np.median(times)), float(np.percentile(times, 90))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--languages", default="")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args(argv)
    languages = {code for code in args.languages.split(",") if code}
    cache = Path(tempfile.gettempdir()) / "dragoman-bench-cache"
    vad = SileroModel.load(resolve("silero-vad", cache))
    model = SmartTurnModel.load(resolve("smart-turn-v3.2", cache))
    rows = [
        r
        for r in eval_rows()
        if r.reference.strip()
        and not r.weak
        and r.duration <= 30
        and (not languages or r.language in languages)
    ]
    info = cpu_info()
    print(f"CPU: {info.model}, {info.cores} cores, AVX2 {info.avx2}, AVX-512 {info.avx512}\n")
    median, p90 = time_calls(model, load(rows[0])[: 8 * RATE], args.calls)
    print(f"Smart Turn v3.2, one call on 8 s (1 thread): median {median:.0f} ms, p90 {p90:.0f} ms\n")
    outcomes: dict[str, list[Outcome]] = {name: [] for name, _ in MODES}
    timed = Timed(model)
    per_clip: list[list[object]] = []
    for index, row in enumerate(rows):
        log(f"{row.name} ({row.duration:.1f} s)")
        speech = load(row)
        audio = np.concatenate([room_noise(LEAD_S, index), speech, room_noise(TAIL_S, index + 1)])
        end_ms = speech_end_ms(vad, audio)
        line: list[object] = [row.name, row.language]
        for name, config in MODES:
            outcome = segment(config, vad, timed, audio, end_ms)
            outcomes[name].append(outcome)
            line.append(f"{outcome.end_ms:+.0f} ms" + (f", {outcome.cuts} cut" if outcome.cuts else ""))
        per_clip.append(line)
    summary = []
    server = np.array([o.end_ms for o in outcomes[MODES[0][0]]])
    for name, _ in MODES:
        ends = np.array([o.end_ms for o in outcomes[name]])
        cut = sum(o.cuts > 0 for o in outcomes[name])
        summary.append(
            [
                name,
                float(np.nanmedian(ends)),
                float(np.nanmedian(ends - server)),
                f"{cut} / {len(rows)}",
                sum(o.cuts for o in outcomes[name]),
            ]
        )
    print(
        table(
            [
                "mode",
                "median end (ms past the speech)",
                "median vs server_vad (ms)",
                "recordings cut",
                "cuts",
            ],
            summary,
            whole=True,
        )
    )
    print(
        f"\nSmart Turn calls while segmenting: {timed.calls}, mean {1000 * timed.seconds / timed.calls:.0f} ms\n"
    )
    print(table(["recording", "lang", *(name for name, _ in MODES)], per_clip, whole=True))


if __name__ == "__main__":
    main()
