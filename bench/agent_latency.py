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
2. **barge_in**: the storyteller instructions and a text request make a long answer; at
   its first audio delta the client speaks a short recording at real time. From the
   interruption's first sample (and from its speech onset, by Silero) to
   `input_audio_buffer.speech_started`, to `response.done` (cancelled, `turn_detected`)
   and to the last audio delta of the cut response.

Progress goes to stderr, markdown tables to stdout. The machines are shared 2-core ones:
compare figures of the same run. Resident memory as sessions are added is
`python -m bench.agent_memory`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import server as dragoman_server
from bench.agent_client import (
    LONGEST_S,
    WIRE_RATE,
    Client,
    Utterance,
    open_client,
    pool_idle,
    questions,
    speak,
    stage_lines,
)
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
STORYTELLER = "You tell long, detailed stories of at least ten sentences, however they are asked for."
STORIES = (
    "Tell me a long story about a lighthouse keeper.",
    "Tell me a long story about a lost dog finding its way home.",
    "Tell me a long story about a dragon who is afraid of heights.",
    "Tell me a long story about two friends sailing around the world.",
    "Tell me a long story about a robot learning to paint.",
    "Tell me a long story about a village under the sea.",
    "Tell me a long story about a clockmaker and a magic watch.",
    "Tell me a long story about a girl who can talk to birds.",
)
#: Short single utterances spoken over the answer.
INTERRUPTIONS = (
    "en_ls-testclean_6930-75918-0000",
    "en_cmu_goforward",
    "en_speechrecognition_one_two_three",
    "en_pvcheetah_test_en",
    "en_fleurs_test_004",
    "en_ls-testother_7902-96591-0000",
)
ANSWER_TIMEOUT_S = 90.0


# -- 1. latency -------------------------------------------------------------------------------

STAGES = (
    ("end-of-turn decision (`speech_stopped`)", "stopped"),
    ("final transcript (`transcription.completed`)", "transcript"),
    ("LLM call begins", "llm_started"),
    ("LLM first token", "llm_first_token"),
    ("first clause", "first_clause"),
    ("first TTS chunk", "tts_first_chunk"),
    ("first `response.output_audio.delta`", "first_audio"),
    ("first sound (the audio played from its first delta)", "first_sound"),
)

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


@dataclass
class Turn:
    """One spoken question: when each stage happened, in seconds after the end of the speech."""

    mode: str
    name: str
    speech_s: float
    at: dict[str, float] = field(default_factory=dict)
    #: Turns that ended before the speech did (the user was cut off).
    cuts: int = 0
    #: LLM pieces (about one a token) made by the first clause.
    pieces: int = 0
    #: Answers whose audio began while the user was speaking (to a turn cut mid-speech).
    spoke_over: int = 0
    #: The last turn's answer waited for an earlier turn's answer to end.
    queued: bool = False
    transcript: str = ""
    answer: str = ""
    error: str = ""

    def span(self, later: str, earlier: str | None) -> float:
        """Seconds from one stage to a later one (from the end of speech when `earlier` is None)."""
        start = 0.0 if earlier is None else self.at.get(earlier, float("nan"))
        return self.at.get(later, float("nan")) - start


#: An answer whose LLM call began this much before its final transcript was received was
#: started early (a normal start comes a few ms before the client has the transcript).
EARLY_S = 0.05
COMPLETED = "conversation.item.input_audio_transcription.completed"
FAILED = "conversation.item.input_audio_transcription.failed"


@dataclass
class Final:
    """The last turn of a spoken question, its answer, and the server's stage record of it."""

    started_at: float
    stopped_at: float
    heard_at: float
    transcript: str
    response_id: str = ""
    #: Events before the answer's response.created: what happened before it.
    created_index: int = 0
    record: dict[str, Any] | None = None

    def first_audio(self, client: Client) -> float | None:
        audio = [
            at for at, e in client.of("response.output_audio.delta") if e["response_id"] == self.response_id
        ]
        return audio[0] if audio else None

    def first_sound(self, client: Client, rate: int) -> float | None:
        """When the answer is first heard, played from its first delta on: that delta's arrival
        plus the silence before the first sample above -60 dBFS."""
        deltas = [
            (at, e)
            for at, e in client.of("response.output_audio.delta")
            if e["response_id"] == self.response_id
        ]
        played = 0
        for _, event in deltas:
            pcm = np.frombuffer(base64.b64decode(event["delta"]), dtype="<i2")
            loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > 32)
            if len(loud):
                return deltas[0][0] + (played + int(loud[0])) / rate
            played += len(pcm)
        return None

    def at(self, key: str) -> float | None:
        """When a stage of the record happened (epoch seconds)."""
        if self.record is None:
            return None
        if key == "llm_started":
            return float(self.record["llm_started_at"])
        if self.record.get(key + "_ms") is None:
            return None
        return float(self.record["llm_started_at"]) + float(self.record[key + "_ms"]) / 1000


def final_turn(client: Client, log_path: Path) -> Final | None:
    """The last turn once it is over and its answer is done; None until then.

    Its answer is the first response created after its transcript went out (an answer
    started early is held until then). Its stage record is the last one whose LLM call
    began after the turn's speech_started and before the answer's first audio: an early
    start dropped because the user went on comes before it.
    """
    events = client.events
    stops = [
        (i, at, e) for i, (at, e) in enumerate(events) if e["type"] == "input_audio_buffer.speech_stopped"
    ]
    starts = [(at, e) for at, e in events if e["type"] == "input_audio_buffer.speech_started"]
    if not stops or starts[-1][0] > stops[-1][1]:
        return None
    _, stopped_at, stopped = stops[-1]
    item = stopped["item_id"]
    started_at = next((at for at, e in starts if e["item_id"] == item), starts[-1][0])
    heard = [
        (i, at, e)
        for i, (at, e) in enumerate(events)
        if e["type"] in (COMPLETED, FAILED) and e["item_id"] == item
    ]
    if not heard:
        return None
    heard_index, heard_at, event = heard[0]
    final = Final(started_at, stopped_at, heard_at, str(event.get("transcript") or ""))
    if not final.transcript.strip():
        return final  # nothing to answer
    created = next(
        ((i, e) for i, (_, e) in enumerate(events) if i > heard_index and e["type"] == "response.created"),
        None,
    )
    if created is None:
        return None
    final.created_index, final.response_id = created[0], created[1]["response"]["id"]
    if not any(e["type"] == "response.done" and e["response"]["id"] == final.response_id for _, e in events):
        return None
    first_audio = final.first_audio(client)
    records = [
        r
        for r in stage_lines(log_path).get(client.session_id, [])
        if started_at <= r["llm_started_at"] <= (first_audio or float("inf"))
    ]
    final.record = records[-1] if records else None
    return final


def spoke_over(client: Client) -> int:
    """Responses whose audio began while the user was in a turn (between speech_started and
    speech_stopped): an answer to an earlier turn, started after the user went on."""
    turns: list[tuple[float, float]] = []
    for at, event in client.events:
        if event["type"] == "input_audio_buffer.speech_started":
            turns.append((at, float("inf")))
        elif event["type"] == "input_audio_buffer.speech_stopped" and turns:
            turns[-1] = (turns[-1][0], at)
    return sum(any(begin < at < stop for begin, stop in turns) for at, _ in client.of("response.created"))


async def ask(srv: Server, mode: str, turns: dict[str, Any], question: Utterance) -> Turn:
    await pool_idle(srv.http)
    client = await open_client(srv.ws, {"audio": {"input": {"turn_detection": turns}}})
    turn = Turn(mode, question.name, question.end_s - question.onset_s)
    stop = asyncio.Event()
    began = time.time() + 0.05
    speaking = asyncio.create_task(speak(client, question.audio, began, stop, ANSWER_TIMEOUT_S))
    end = began + question.end_s  # the end of the speech, as spoken
    found: list[Final] = []

    def answered() -> bool:
        final = final_turn(client, srv.log) if time.time() > end else None
        if final is not None:
            found.append(final)
        return final is not None

    try:
        await client.until(answered, ANSWER_TIMEOUT_S + question.end_s)
    except (TimeoutError, ConnectionError) as exc:
        turn.error = str(exc)[:120]
    finally:
        stop.set()
        speaking.cancel()
        await asyncio.gather(speaking, return_exceptions=True)
        await client.close()
    turn.cuts = len(client.of("input_audio_buffer.speech_stopped")) - 1
    turn.spoke_over = spoke_over(client)
    if not found:
        return turn
    final = found[0]
    turn.transcript = final.transcript
    turn.at["stopped"] = final.stopped_at - end
    turn.at["transcript"] = final.heard_at - end
    if not final.response_id:
        turn.error = "the last turn's transcript was empty"
        return turn
    first_audio = final.first_audio(client)
    if first_audio is not None:
        turn.at["first_audio"] = first_audio - end
    first_sound = final.first_sound(client, WIRE_RATE)
    if first_sound is not None:
        turn.at["first_sound"] = first_sound - end
    dones = [(i, e) for i, (_, e) in enumerate(client.events) if e["type"] == "response.done"]
    heard_index = next(i for i, (at, _) in enumerate(client.events) if at >= final.heard_at)
    turn.queued = any(heard_index < i < final.created_index for i, _ in dones)
    said = [e for _, e in dones if e["response"]["id"] == final.response_id]
    parts = [p for item in said[0]["response"]["output"] for p in item.get("content", [])]
    turn.answer = " ".join(str(p.get("transcript") or "") for p in parts)
    if final.record is None:
        turn.error = "no stage record for the answer"
        return turn
    turn.pieces = int(final.record.get("first_clause_pieces") or 0)
    for key in ("llm_started", "llm_first_token", "first_clause", "tts_first_chunk"):
        at = final.at(key)
        if at is not None:
            turn.at[key] = at - end
    return turn


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


def ms(values: Sequence[float]) -> list[float]:
    return [1000 * v for v in values]


def stage_headers(groups: Sequence[str]) -> list[str]:
    headers = ["stage (ms after the end of speech)"]
    for group in groups:
        headers += [f"{group} p50", f"{group} p95"]
    return headers


def stage_table(groups: dict[str, list[Turn]]) -> str:
    """Each stage's p50 and p95 (ms after the end of speech) in each group of turns."""
    rows: list[list[object]] = []
    for label, key in STAGES:
        row: list[object] = [label]
        for turns in groups.values():
            values = ms([t.at.get(key, float("nan")) for t in turns])
            row += [percentile(values, 50), percentile(values, 95)]
        rows.append(row)
    return table(stage_headers(list(groups)), rows, whole=True)


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


# -- 2. barge-in ------------------------------------------------------------------------------


@dataclass
class BargeIn:
    name: str
    #: From the interruption's first sample, in seconds.
    started: float = float("nan")
    done: float = float("nan")
    last_audio: float = float("nan")
    onset_s: float = 0.0
    #: Seconds of the answer's audio received beyond the time it had been playing.
    ahead_s: float = float("nan")
    status: str = ""
    error: str = ""


async def barge_in(srv: Server, story: str, interruption: Utterance) -> BargeIn:
    await pool_idle(srv.http)
    client = await open_client(srv.ws, {"instructions": STORYTELLER})
    result = BargeIn(interruption.name, onset_s=interruption.onset_s)
    stop = asyncio.Event()
    speaking: asyncio.Task[None] | None = None
    try:
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": story}]}
        await client.send({"type": "conversation.item.create", "item": item})
        await client.send({"type": "response.create"})
        first_at, first = await client.wait_for(
            lambda e: e["type"] == "response.output_audio.delta", ANSWER_TIMEOUT_S
        )
        began = time.time()
        speaking = asyncio.create_task(speak(client, interruption.audio, began, stop, 3.0))
        response_id = first["response_id"]
        done_at, done = await client.wait_for(
            lambda e: e["type"] == "response.done" and e["response"]["id"] == response_id, 60
        )
        result.done = done_at - began
        result.status = (
            f"{done['response']['status']} ({(done['response'].get('status_details') or {}).get('reason')})"
        )
        # speech_started follows the cut response's response.done.
        started_at, _ = await client.wait_for(lambda e: e["type"] == "input_audio_buffer.speech_started", 10)
        result.started = started_at - began
        deltas = [
            (at, e) for at, e in client.of("response.output_audio.delta") if e["response_id"] == response_id
        ]
        result.last_audio = deltas[-1][0] - began
        audio_s = sum(len(base64.b64decode(e["delta"])) for _, e in deltas) / 2 / WIRE_RATE
        result.ahead_s = audio_s - (deltas[-1][0] - first_at)
    except (TimeoutError, ConnectionError) as exc:
        result.error = str(exc)[:120]
    finally:
        stop.set()
        if speaking is not None:
            speaking.cancel()
            await asyncio.gather(speaking, return_exceptions=True)
        await client.close()
    return result


async def run_barge_ins(srv: Server, interruptions: list[Utterance], count: int) -> list[BargeIn]:
    results = []
    for index in range(count):
        result = await barge_in(srv, STORIES[index % len(STORIES)], interruptions[index % len(interruptions)])
        results.append(result)
        log(
            f"barge-in {result.name}: response.done {1000 * result.done:.0f} ms, {result.status} {result.error}"
        )
    return results


def report_barge_ins(results: list[BargeIn]) -> None:
    print("## 2. Barge-in reaction\n")
    print(
        f"{len(results)} interruptions: a long story (storyteller instructions, a text request), "
        "and at its first audio delta a short recording spoken at real time (100 ms appends) "
        "over it, with the default `server_vad` (a barge-in needs `min_speech_ms`, 384 ms, of "
        "speech). Milliseconds from the interruption's first sample, and from its speech onset "
        "(Silero's first speech window; the recordings begin with some silence). Audio ahead: "
        "seconds of the answer received beyond the time since its first delta, which a "
        "WebSocket client holds in its playback buffer and must drop at `response.done`.\n"
    )
    ok = [r for r in results if not r.error]
    rows: list[list[object]] = []
    for label, values in (
        ("→ `speech_started`", [r.started for r in ok]),
        ("→ `response.done` (cancelled)", [r.done for r in ok]),
        ("→ last audio delta of the cut response", [r.last_audio for r in ok]),
    ):
        from_onset = [v - r.onset_s for v, r in zip(values, ok, strict=True)]
        rows.append(
            [
                label,
                percentile(ms(values), 50),
                percentile(ms(values), 95),
                percentile(ms(from_onset), 50),
                percentile(ms(from_onset), 95),
            ]
        )
    print(
        table(
            ["interruption", "from first sample p50", "p95", "from speech onset p50", "p95"], rows, whole=True
        )
    )
    statuses = sorted({r.status for r in ok})
    ahead = percentile([r.ahead_s for r in ok], 50)
    print(
        f"\nStatus of the cut responses: {', '.join(statuses) or '–'}; failed runs: "
        f"{len(results) - len(ok)}. Audio ahead at the cut: p50 {ahead:.1f} s.\n"
    )
    detail = [
        [
            r.name,
            f"{1000 * r.onset_s:.0f}",
            1000 * r.started,
            1000 * r.done,
            1000 * r.last_audio,
            r.status or r.error,
        ]
        for r in results
    ]
    print("<details><summary>per interruption</summary>\n")
    print(
        table(
            ["recording", "onset ms", "speech_started ms", "response.done ms", "last audio ms", "status"],
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
