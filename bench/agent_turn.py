"""One spoken question to the voice agent, timed by stage: `ask` and the stage table.

The question is streamed at real time (bench/agent_client.py's client and `speak`) in a new
session; `Turn` holds when each stage happened, in seconds after the end of the speech as
spoken, from the events received and the server's `agent stages` log line. Used by
`python -m bench.agent_latency`, `bench.agent_remote`, `bench.webrtc_latency` and
`bench.agent_memory`.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.agent_client import WIRE_RATE, Client, Utterance, open_client, pool_idle, speak, stage_lines
from bench.report import percentile, table
from harness.server import Server

ANSWER_TIMEOUT_S = 90.0

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
