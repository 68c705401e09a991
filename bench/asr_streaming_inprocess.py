"""The in-process sections of `python -m bench.asr_streaming`: WER, step cost, revisions.

The real engine drives the transcription session in-process (`bench.asr_inprocess`):
streaming WER against offline WER on the English recordings (section 1) with the
first-partial latency, step time as an item grows with and without the re-decode window
(section 2), and delta revisions (section 5, with the server loads' revised items).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench import asr_inprocess as inproc
from bench.asr_load import LoadResult
from bench.asr_streaming_plan import Plan
from bench.asr_streaming_server import batch_label, pct
from bench.audio import RATE, Clip, wer_clips
from bench.report import log, percentile, table
from bench.results import record
from dragoman.engines.asr.base import ASREngine
from dragoman.sessions.transcription.session import EngineProfile, SessionConfig
from dragoman.tools.wer import wer

#: The WER goal of the issue: streaming WER at most this times the offline WER.
WER_GOAL = 1.15


@dataclass
class WerRun:
    clips: list[Clip]
    offline: list[str]
    offline_seconds: float
    streamed: dict[str, list[inproc.StreamRun]]


def run_wer(engine: ASREngine, plan: Plan, profile: EngineProfile, cap: float) -> WerRun:
    shortest, longest = plan.wer_range
    clips = wer_clips(cap, shortest=shortest, longest=longest)
    offline: list[str] = []
    offline_seconds = 0.0
    for clip in clips:
        text, seconds = inproc.offline(engine, clip.parts, "en")
        offline.append(text)
        offline_seconds += seconds
    log(f"offline: {len(clips)} clips in {offline_seconds:.1f} s")
    streamed: dict[str, list[inproc.StreamRun]] = {}
    for name, config in plan.configs:
        began = time.perf_counter()
        streamed[name] = [inproc.stream(engine, profile, clip.parts, config) for clip in clips]
        steps = sum(len(r.steps) for r in streamed[name])
        log(f"streaming [{name}]: {steps} steps in {time.perf_counter() - began:.1f} s")
    return WerRun(clips, offline, offline_seconds, streamed)


def report_wer(run: WerRun, cap: float, plan: Plan) -> None:
    refs = [c.row.reference for c in run.clips]
    offline_wer = wer(refs, run.offline)
    split = [c.row.name for c in run.clips if len(c.parts) > 1]
    subset = (
        " (only the recordings of {:g}-{:g} s)".format(*plan.wer_range)
        if plan.wer_range != (0.0, float("inf"))
        else ""
    )
    print("## 1. Streaming vs offline WER (English, in-process)\n")
    print(
        f"{len(run.clips)} English rows of asr.tsv{subset}, {sum(c.seconds for c in run.clips):.0f} s of audio. Left out: "
        "the weak references (en_vosk_digits, en_fw_stereo_2ch) and the row without an English "
        f"transcript (st/en_covost2_st_to_de). Longer than the {cap:g} s item cap and split into equal "
        f"parts, each its own item, transcripts joined: {', '.join(split) or 'none'}. Language fixed to en "
        "for both. Streaming: the session fed 100 ms appends, each due step run at once, then a commit. "
        "Offline: one engine call per clip (per part). Corpus WER over normalised text.\n"
    )
    rows: list[list[object]] = []
    for name, runs in run.streamed.items():
        streaming_wer = wer(refs, [r.transcript for r in runs])
        ratio = streaming_wer / offline_wer if offline_wer else float("nan")
        verdict = "yes" if streaming_wer <= WER_GOAL * offline_wer + 1e-9 else "no"
        steps = sum(len(r.steps) for r in runs)
        rows.append([name, pct(offline_wer), pct(streaming_wer), f"{ratio:.3f}", verdict, steps])
        if name == next(iter(run.streamed)) and not plan.quick:  # the defaults (bench/results.py)
            record(
                "asr_streaming",
                "streaming transcription WER",
                f"streaming / offline WER, {plan.model}",
                ratio,
                "×",
                target=f"≤ {WER_GOAL:g}×",
                met=verdict == "yes",
                conditions=f"{pct(streaming_wer)} / {pct(offline_wer)}; {len(run.clips)} English recordings",
            )
    print(table(["streaming setting", "offline WER", "streaming WER", "ratio", "≤ 1.15×", "steps"], rows))
    names = list(run.streamed)
    headers = ["clip", "s", "offline WER", *(f"streaming WER ({n.split(' (')[0]})" for n in names)]
    detail = []
    for i, clip in enumerate(run.clips):
        row: list[object] = [clip.row.name, f"{clip.seconds:.1f}", pct(wer([refs[i]], [run.offline[i]]))]
        row += [pct(wer([refs[i]], [run.streamed[n][i].transcript])) for n in names]
        detail.append(row)
    print("\n<details><summary>per clip</summary>\n")
    print(table(headers, detail))
    print("\n</details>\n")


def report_revisions(run: WerRun, load_results: list[LoadResult]) -> None:
    print("## 5. Delta revisions\n")
    print(
        "A revision is a step whose firm text contradicts deltas already sent (the session's "
        "`revisions` counter); an item is revised when its concatenated deltas are not a prefix "
        "of its completed transcript.\n"
    )
    rows: list[list[object]] = []
    for name, runs in run.streamed.items():
        items = sum(len(r.transcripts) for r in runs)
        revisions = sum(r.revisions for r in runs)
        revised = sum(r.items_revised for r in runs)
        rewrites = f"{sum(r.rewrites for r in runs)}/{sum(r.partials for r in runs)}"
        rows.append(
            [f"in-process, {name}", items, revisions, f"{100 * revisions / items:.1f}", revised, rewrites]
        )
    for result in load_results:
        label = f"server, {result.sessions} sessions, {batch_label(result.max_batch)}"
        rows.append([label, result.completed, "–", "–", result.revised, "–"])
    headers = [
        "run",
        "items",
        "revision steps",
        "per 100 items",
        "items revised",
        "partials rewriting the tail",
    ]
    print(table(headers, rows))
    print(
        "\nDeltas carry only the stable prefix the next step is forced to start with, so a revision "
        "needs an engine result that does not start with its forced prefix. The last column counts "
        "partial events whose text does not extend the item's previous partial: the unstable tail "
        "being rewritten, which clients of `mstar.transcription.partial` see.\n"
    )


def run_steps(engine: ASREngine, profile: EngineProfile, plan: Plan, clips: list[Clip]) -> None:
    """Step time as the item grows, with the window (after) and without it (before), in one run."""
    longest = max(clips, key=lambda c: max(len(p) for p in c.parts))
    audio = max(longest.parts, key=len)[: int(plan.step_seconds * RATE)]
    windowed = SessionConfig(language="en", max_window_seconds=plan.max_window)
    whole = SessionConfig(language="en", max_window_seconds=0.0)
    # Interleaved, twice each, so that a change in the machine's load hits both alike.
    runs: dict[str, list[inproc.StreamRun]] = {"on": [], "off": []}
    for _ in range(2):
        runs["off"].append(inproc.stream(engine, profile, (audio,), whole))
        runs["on"].append(inproc.stream(engine, profile, (audio,), windowed))
    print("## 2. Step cost against audio length, before and after the window (in-process)\n")
    print(
        f"{longest.row.name}, first {len(audio) / RATE:.1f} s, streamed twice without a window (every step "
        f"re-decodes the whole item: before) and twice with a {plan.max_window:g} s window (after), "
        "interleaved. Times are the engine call's wall time (best of the two runs).\n"
    )
    rows: list[list[object]] = []
    pairs = zip(
        zip(*(r.steps for r in runs["off"]), strict=True),
        zip(*(r.steps for r in runs["on"]), strict=True),
        strict=False,
    )
    totals = [0.0, 0.0]
    for off, on in pairs:
        kind = "final" if off[0].final else "partial"
        best_off, best_on = min(s.seconds for s in off), min(s.seconds for s in on)
        totals[0] += best_off
        totals[1] += best_on
        rows.append(
            [
                f"{off[0].item_seconds:.1f}",
                kind,
                f"{best_off:.3f}",
                f"{on[0].audio_seconds:.1f}",
                f"{best_on:.3f}",
            ]
        )
    print(
        table(["item audio s", "step", "step time s (no window)", "window s", "step time s (window)"], rows)
    )
    print(f"\nTotal step time: {totals[0]:.2f} s without the window, {totals[1]:.2f} s with it.\n")


def report_first_partial(run: WerRun) -> None:
    firsts = [lat for r in next(iter(run.streamed.values())) for lat in r.first_partial]
    print(
        f"First-partial latency in-process (default settings, {len(firsts)} items of the WER set: from "
        "the append that completes the first chunk to the partial event): "
        f"p50 {percentile(firsts, 50):.3f} s, max {max(firsts, default=float('nan')):.3f} s. "
        "Over the wire, under load, see the first-partial column of table 3.\n"
    )
