"""The English ASR engines side by side: Moonshine base-en (onnxruntime) against Whisper base
(CTranslate2, int8), in one run on one machine.

- Offline WER: each English recording of ../shared/eval with a human reference (the weak
  ones left out, eval/README.md), one engine call per part of at most 30 s.
- Step cost against audio length: one step of 1, 2, 5, 10 and 20 s of continuous speech
  (recordings joined end to end), alone and as a batch of 4 equal-length steps from
  different offsets, the median of `--repeats` runs. Moonshine's encoder reads only the
  audio; Whisper's encodes the audio plus a second of silence, rounded up to its grid.

AVX2: `--avx2` caps CTranslate2 (`CT2_FORCE_CPU_ISA=AVX2`) and oneDNN the way an AVX2-only
CPU would run them. onnxruntime has no such switch (MLAS picks its kernels from cpuid at
load), so on an AVX-512 machine Moonshine's figures are its AVX-512 ones: the table says
so. Run as `python -m bench.asr_engines [--limit N] [--repeats R] [--threads T] [--avx2]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from bench.audio import RATE, Audio, Clip, wer_clips
from dragoman.config import ASRSettings, load_settings
from dragoman.cpu import cpu_info
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.registry import create_asr_engine
from dragoman.tools.wer import wer


def _cap_isa() -> None:
    """Set the ISA caps before ctranslate2 loads (it reads them once, at import; the
    imports above do not load it)."""
    if "ctranslate2" in sys.modules:
        raise RuntimeError("--avx2 must be applied before ctranslate2 is imported")
    os.environ["CT2_FORCE_CPU_ISA"] = "AVX2"
    os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"


WINDOWS = (1.0, 2.0, 5.0, 10.0, 20.0)
BATCH = 4


@dataclass
class Row:
    engine: str
    wer: float
    audio_seconds: float
    offline_wall: float
    #: window seconds -> (one step's wall seconds, per-step wall seconds in a batch of BATCH)
    steps: dict[float, tuple[float, float]]


def _lscpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "lscpu not available"
    lines = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}
    wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
    flags = set(lines.get("Flags", "").split())
    have = " ".join(f for f in wanted if f in flags) or "none of " + " ".join(wanted)
    return f"{lines.get('Model name', '?')}; {lines.get('CPU(s)', '?')} CPUs; flags: {have}"


def _median_wall(run: Callable[[], object], repeats: int) -> float:
    walls = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        walls.append(time.perf_counter() - began)
    return statistics.median(walls)


def measure(label: str, engine: ASREngine, clips: list[Clip], speech: Audio, repeats: int) -> Row:
    engine.warm_up()
    references, hypotheses = [], []
    audio_seconds = 0.0
    began = time.perf_counter()
    for clip in clips:
        parts = clip.parts
        results = engine.transcribe_batch([StepRequest(p, language="en") for p in parts])
        hypotheses.append(" ".join(r.text if isinstance(r, StepResult) else "" for r in results))
        references.append(clip.row.reference)
        audio_seconds += sum(len(p) for p in parts) / RATE
    offline_wall = time.perf_counter() - began
    steps: dict[float, tuple[float, float]] = {}
    for seconds in WINDOWS:
        n = int(seconds * RATE)
        offsets = [int(k * (len(speech) - n) / max(1, BATCH - 1)) for k in range(BATCH)]
        windows = [speech[o : o + n] for o in offsets]
        batch = [StepRequest(w, language="en") for w in windows]
        one = _median_wall(partial(engine.transcribe_batch, batch[:1]), repeats)
        many = _median_wall(partial(engine.transcribe_batch, batch), repeats) / BATCH
        steps[seconds] = (one, many)
    return Row(label, wer(references, hypotheses), audio_seconds, offline_wall, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="only the N shortest recordings (0: all)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per step-cost figure (median)")
    parser.add_argument("--threads", type=int, default=2, help="threads per engine call")
    parser.add_argument("--avx2", action="store_true", help="cap CTranslate2/oneDNN at AVX2")
    args = parser.parse_args()
    if args.avx2:
        _cap_isa()

    load_start = os.getloadavg()
    clips = wer_clips(30.0)
    if args.limit:
        clips = clips[: args.limit]
    # Continuous speech for the step windows: every English clip end to end (at least 20 s).
    speech = np.concatenate([p for c in wer_clips(30.0) for p in c.parts]).astype(np.float32)
    cache = load_settings().cache_dir
    rows = []
    for label, settings in (
        ("whisper-base int8 (whisper-ct2)", ASRSettings(model="whisper-base", threads=args.threads)),
        ("moonshine-base-en fp32 (moonshine)", ASRSettings(backend="moonshine", threads=args.threads)),
    ):
        engine = create_asr_engine(settings, cache)
        try:
            rows.append(measure(label, engine, clips, speech, args.repeats))
        finally:
            engine.close()
    load_end = os.getloadavg()

    print(f"CPU: {cpu_info().describe()}")
    print(f"lscpu: {_lscpu()}")
    isa = "CT2/oneDNN capped at AVX2; onnxruntime uncapped (no switch)" if args.avx2 else "no ISA cap"
    print(
        f"{isa}; {args.threads} threads per call; {len(clips)} English recordings; "
        f"step cost: median of {args.repeats}; load average {load_start[0]:.2f} at start, "
        f"{load_end[0]:.2f} at end (a busy machine inflates every figure)"
    )
    head = "| engine | WER | offline RTF |" + "".join(
        f" {w:g} s step (alone / in {BATCH}) |" for w in WINDOWS
    )
    print()
    print(head)
    print("|" + "---|" * (3 + len(WINDOWS)))
    for row in rows:
        cells = "".join(f" {one:.3f} / {many:.3f} |" for one, many in row.steps.values())
        rtf = row.offline_wall / row.audio_seconds if row.audio_seconds else float("nan")
        print(f"| {row.engine} | {row.wer:.3f} | {rtf:.3f} |{cells}")
    print()
    print("Step figures are wall seconds per step; 'in 4' is a batch of 4 equal-length steps, per step.")


if __name__ == "__main__":
    main()
