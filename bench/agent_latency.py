"""Voice-agent latency with the real models: `python -m bench.agent_latency`.

    --questions 24     spoken questions per turn-detection mode (default: every usable English clip)
    --barge-ins 8      interruptions timed
    --only latency,barge_in
    --llm-threads 1    the server's llama.cpp threads (default: its budget, every core)
    --quick            6 questions, 3 barge-ins
    --llm-models qwen2.5-0.5b-instruct-gguf,qwen2.5-1.5b-instruct-gguf   one server each, in turn
    --services transcription,mt,agent   what else the server loads (default: the agent alone)

A real `dragoman serve --services agent` on a free 127.0.0.1 port (Whisper, Silero and
Smart Turn, the LLM named in `--llm-models` or the default `auto`, the default TTS voice),
driven by plain `websockets` clients speaking the GA Realtime protocol (the openai SDK would parse every event into
pydantic models, CPU the server would lose on 2 cores).

1. **latency**: each English recording of ../shared/eval is one spoken question in a new
   session, streamed at real time in 100 ms appends (each sent once its 100 ms have been
   "recorded"), then silence at real time until the answer ends. Times are measured from
   the end of the speech as spoken: the wall-clock moment of the recording's last window
   that Silero scores as speech, on the appends' schedule. Stages: the end-of-turn decision
   (`input_audio_buffer.speech_stopped` received), the final transcript
   (`conversation.item.input_audio_transcription.completed` received), the LLM's first
   token, the first clause cut from its text and the first TTS chunk of that clause (the
   server's `agent stages` log line, same clock), and the first
   `response.output_audio.delta` received. Each question runs with `server_vad` and with
   `semantic_vad` (eagerness auto), alternating, in the same run.
2. **barge_in**: a short recording spoken over a long answer; the time to
   `speech_started`, to the cancelled `response.done` and to the cut response's last audio
   delta (bench/agent_barge_in.py).

Progress goes to stderr, markdown tables to stdout. The machines are shared 2-core ones:
compare figures of the same run. Resident memory as sessions are added is
`python -m bench.agent_memory`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import server as dragoman_server
from bench.agent_barge_in import INTERRUPTIONS, report_barge_ins, run_barge_ins
from bench.agent_client import LONGEST_S, Utterance, questions
from bench.agent_turn import STAGES, Turn, ask, ms, stage_headers, stage_table
from bench.report import header, log, percentile, table
from bench.results import record
from dragoman.audio.vad import SileroModel
from dragoman.config import default_cache_dir
from dragoman.weights import resolve
from harness.server import Server

SECTIONS = ("latency", "barge_in")
#: The issue's bars: p50 to the first audio delta, and the aim with semantic_vad.
BAR_S, AIM_S = 1.5, 1.0
MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("server_vad", {"type": "server_vad"}),
    ("semantic_vad", {"type": "semantic_vad", "eagerness": "auto"}),
)


# -- 1. latency -------------------------------------------------------------------------------

#: (label, later stage, earlier stage): the time each stage takes.
SPANS: tuple[tuple[str, str, str | None], ...] = (
    ("end of speech → end-of-turn decision", "stopped", None),
    ("end-of-turn decision → final transcript (Whisper on the turn)", "transcript", "stopped"),
    ("final transcript → LLM call begins (< 0: early start)", "llm_started", "transcript"),
    ("LLM call → first token (prompt prefill)", "llm_first_token", "llm_started"),
    ("first token → first clause", "first_clause", "llm_first_token"),
    ("first clause → first TTS chunk", "tts_first_chunk", "first_clause"),
    (
        "first TTS chunk → first audio delta received (held until the transcript)",
        "first_audio",
        "tts_first_chunk",
    ),
    ("first audio delta → first sound (silence the voice leads with)", "first_sound", "first_audio"),
)

#: An answer whose LLM call began this much before its final transcript was received was
#: started early (a normal start comes a few ms before the client has the transcript).
EARLY_S = 0.05


async def run_latency(srv: Server, utterances: list[Utterance]) -> list[Turn]:
    results: list[Turn] = []
    for index, question in enumerate(utterances):
        order = MODES if index % 2 == 0 else MODES[::-1]  # neither mode always runs first
        for mode, turns in order:
            turn = await ask(srv, mode, turns, question)
            results.append(turn)
            first = turn.at.get("first_audio", float("nan"))
            log(f"{mode:12} {question.name}: first audio {1000 * first:.0f} ms {turn.error}")
    return results


def report_latency(turns: list[Turn], model: str, services: str) -> None:
    names = [mode for mode, _ in MODES]
    by_mode = {mode: [t for t in turns if t.mode == mode] for mode in names}
    count = len(by_mode[names[0]])
    print("## 1. End of speech to first audio, by stage\n")
    print(
        f"{count} spoken questions (English recordings of asr.tsv up to {LONGEST_S:g} s, FLEURS "
        "among them), each in a new session, once per mode. Milliseconds after the end of the "
        "speech as spoken (Silero's last speech window on the real-time schedule); each stage "
        "is a moment, so a later stage includes the earlier ones. The LLM, clause and TTS "
        "moments are the server's `agent stages` log line (same machine, same clock).\n"
    )
    headers = stage_headers(names)
    print(stage_table(by_mode))
    print("\nEach stage's own time (p50 / p95 of the per-question differences, ms):\n")
    rows = []
    for label, later, earlier in SPANS:
        row: list[object] = [label]
        for mode in names:
            diffs = ms([t.span(later, earlier) for t in by_mode[mode]])
            row += [percentile(diffs, 50), percentile(diffs, 95)]
        rows.append(row)
    print(table(["stage", *headers[1:]], rows, whole=True))
    print(
        "\nAn early start begins the LLM call on a provisional transcript at a pause the turn "
        "model judges final, before the silence runs out: its LLM start comes before the "
        "final transcript (a negative span) and its audio is held until that transcript "
        "goes out.\n"
    )
    summary = []
    for mode in names:
        firsts = ms([t.at.get("first_audio", float("nan")) for t in by_mode[mode]])
        p50 = percentile(firsts, 50)
        failed = sum(1 for t in by_mode[mode] if "first_audio" not in t.at)
        cut = sum(1 for t in by_mode[mode] if t.cuts)
        over = sum(1 for t in by_mode[mode] if t.spoke_over)
        queued = sum(1 for t in by_mode[mode] if t.queued)
        early = sum(1 for t in by_mode[mode] if t.span("llm_started", "transcript") < -EARLY_S)
        summary.append(
            [
                mode,
                p50,
                percentile(firsts, 95),
                "yes" if p50 < 1000 * BAR_S else "no",
                "yes" if p50 < 1000 * AIM_S else "no",
                f"{early} / {len(by_mode[mode])}",
                f"{cut} / {len(by_mode[mode])}",
                over,
                queued,
                failed,
            ]
        )
        for name, value, aim in (("p50", p50, AIM_S), ("p95", percentile(firsts, 95), BAR_S)):
            record(
                "agent_latency",
                f"voice agent latency ({model or 'auto'})",
                f"end of speech → first answer audio, {name} ({mode})",
                value,
                "ms",
                target=f"< {1000 * aim:.0f} ms",
                met=value < 1000 * aim,
                conditions=f"services {services}; {len(by_mode[mode])} recordings; early start fired "
                f"{early}/{len(by_mode[mode])}; {failed} unanswered",
            )
    print(
        table(
            [
                "mode",
                "first audio p50 ms",
                "p95 ms",
                f"p50 < {BAR_S:g} s",
                f"p50 < {AIM_S:g} s",
                "early-started answers",
                "questions cut mid-speech",
                "answered over the user",
                "last answer queued",
                "no answer",
            ],
            summary,
            whole=True,
        )
    )
    pace = [
        1000 * (t.at["first_clause"] - t.at["llm_first_token"]) / (t.pieces - 1)
        for t in turns
        if t.pieces > 1 and "first_clause" in t.at and "llm_first_token" in t.at
    ]
    pieces = [float(t.pieces) for t in turns if t.pieces]
    print(
        f"\nThe first clause took p50 {percentile(pieces, 50):.0f} LLM pieces (about one a token; "
        f"the clause cutter waits for the piece after a mark), at p50 {percentile(pace, 50):.0f} ms "
        "a piece after the first."
    )
    print(
        "\nCut mid-speech: a turn ended before the recording's speech did (at a pause); the "
        "latency is that of the last turn's answer, the first response created after the last "
        "turn's transcript. Answered over the user: an answer to a turn cut "
        "mid-speech began its audio while the user was speaking again (its transcript came after "
        "the barge-in check at `speech_started`, so nothing cancelled it). Last answer queued: "
        "the last turn's answer waited for such an answer to finish.\n"
    )
    print("<details><summary>per question</summary>\n")
    detail = []
    for t in turns:
        stages = " / ".join(f"{1000 * t.at[k]:.0f}" if k in t.at else "–" for _, k in STAGES)
        said = t.error or f"{t.transcript[:50]} → {t.answer[:50]}"
        flags = f"{t.cuts}" + (", over" if t.spoke_over else "") + (", queued" if t.queued else "")
        detail.append([t.name, t.mode, f"{t.speech_s:.1f}", stages, flags, said.replace("|", "/")])
    print(
        table(
            ["recording", "mode", "speech s", "stages ms (as above)", "cuts", "heard → said"],
            detail,
            whole=True,
        )
    )
    print("\n</details>\n")


# -- the run ------------------------------------------------------------------------------------


def serve_args(pipelines: int, llm_model: str = "", services: str = "agent") -> list[str]:
    """`dragoman serve` with `services`; `llm_model` "" leaves the server's default (`auto`)."""
    args = [
        "serve",
        "--services",
        *services.split(","),
        "--num-pipelines",
        str(pipelines),
        "--log-level",
        "info",
    ]
    return args + (["--llm-model", llm_model] if llm_model else [])


async def run(args: argparse.Namespace, only: set[str], workdir: Path) -> None:
    vad = SileroModel.load(resolve("silero-vad", default_cache_dir()))
    pool = questions(vad)
    if args.questions > len(pool):
        raise SystemExit(f"only {len(pool)} English recordings of up to {LONGEST_S:g} s")
    chosen = pool[: args.questions] if args.questions else pool
    by_name = {u.name: u for u in pool}
    interruptions = [by_name[name] for name in INTERRUPTIONS if name in by_name]
    for model in args.llm_models.split(","):
        began = time.perf_counter()
        log_path = workdir / f"dragoman-{model or 'default'}.log"
        with dragoman_server.running(serve_args(1, model, args.services), log_path) as srv:
            log(f"server up in {time.perf_counter() - began:.0f} s; {len(chosen)} questions; LLM {model}")
            print(f"## LLM: {model or 'the default'} (services: {args.services})\n")
            if "latency" in only:
                turns = await run_latency(srv, chosen)
                report_latency(turns, model, args.services)
            if "barge_in" in only:
                report_barge_ins(await run_barge_ins(srv, interruptions, args.barge_ins))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=0, help="spoken questions (default: all usable)")
    parser.add_argument("--barge-ins", type=int, default=8)
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated, of {','.join(SECTIONS)}"
    )
    parser.add_argument("--quick", action="store_true", help="6 questions and 3 barge-ins")
    parser.add_argument(
        "--llm-models",
        default="",
        help="comma-separated --llm-model values, one server each in turn (default: the server's own)",
    )
    parser.add_argument(
        "--services", default="agent", help="the server's services (e.g. transcription,mt,agent)"
    )
    parser.add_argument(
        "--llm-threads", type=int, default=0, help="the server's llama.cpp threads (default: every core)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.questions, args.barge_ins = 6, 3
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if unknown := only - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    began = time.perf_counter()
    header("Voice-agent latency benchmark")
    if args.llm_threads:
        os.environ["DRAGOMAN_LLM__THREADS"] = str(args.llm_threads)  # the server inherits it
    threads = os.environ.get("DRAGOMAN_LLM__THREADS", "the server's budget (every core)")
    print(f"Server: `dragoman serve --services {args.services}`, defaults; LLM threads: {threads}.\n")
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-") as tmp:
        asyncio.run(run(args, only, Path(tmp)))
    load_avg = os.getloadavg()
    print(f"Finished in {time.perf_counter() - began:.0f} s; load average at the end {load_avg[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
