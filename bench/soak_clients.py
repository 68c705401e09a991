"""The soak's well-behaved clients (`python -m bench.soak`): sessions of each service.

* `transcriber`: `/v1/realtime?intent=transcription`, real recordings at real-time pace in
  100 ms appends, a commit after each; latency = commit sent → `.completed` of that item.
* `translator`: `/v1/mt` (MT protocol v1), FLORES sentences word by word at 2.6 words/s, the
  next two words as the tail, one update in flight and ≥ 0.5 s apart (as WhisperLiveKit's
  client paces them), `is_final` at the sentence's end; latency = update sent → the
  translation that echoes its seq.
* `agent`: `/v1/realtime` (the voice agent), text items with `response.create` and
  `output_modalities: ["text"]`, every third turn spoken (a recording at real-time pace
  and a pause for server VAD); latency = response.create (or the end of the speech) →
  `response.done`.

The interpreter client is `bench/soak_interpreter.py`, the abusers `bench/soak_abusers.py`.
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from bench.audio import Audio
from bench.soak_connection import DRAIN_S, finish, read_events, reconnecting, send_paced, wait_for
from bench.soak_recorder import Recorder, Tally

ASR_RATE = 16_000
AGENT_RATE = 24_000
COMMITTED = "input_audio_buffer.committed"
COMPLETED = "conversation.item.input_audio_transcription.completed"
FAILED = "conversation.item.input_audio_transcription.failed"
QUESTIONS = (
    "Name one colour.",
    "What is two plus two?",
    "Say hello in French.",
    "What is the capital of Italy?",
    "Name a fruit that is yellow.",
    "How many days are in a week?",
)
AGENT_INSTRUCTIONS = "Answer in one short sentence."


def transcription_update(language: str = "en") -> str:
    # The clients commit each recording: server_vad, the session's default as OpenAI's, goes off.
    input_ = {
        "format": {"type": "audio/pcm", "rate": ASR_RATE},
        "transcription": {"language": language},
        "turn_detection": None,
    }
    return json.dumps(
        {"type": "session.update", "session": {"type": "transcription", "audio": {"input": input_}}}
    )


async def transcriber(url: str, rec: Recorder, index: int, utterances: Sequence[Audio], every: int) -> None:
    role = "transcription"
    order = itertools.islice(itertools.cycle(range(len(utterances))), index * 3, None)

    async def session(ws: ClientConnection, tally: Tally) -> None:
        unacknowledged: deque[float] = deque()  # when each commit went, until its `committed`
        waiting: dict[str, float] = {}  # item_id → when its commit went, until `.completed`
        settled = asyncio.Event()

        def handle(now: float, event: dict[str, Any]) -> None:
            kind = event["type"]
            if kind == COMMITTED:
                waiting[event["item_id"]] = unacknowledged.popleft() if unacknowledged else now
                tally.accepted += 1
            elif kind == "error" and str(event.get("event_id") or "").startswith("commit") and unacknowledged:
                unacknowledged.popleft()  # that commit was refused
            elif kind == COMPLETED and (at := waiting.pop(event["item_id"], None)) is not None:
                tally.answered += 1
                rec.latency("transcription", at, now - at)
            elif kind == FAILED and waiting.pop(event["item_id"], None) is not None:
                tally.failed += 1
                rec.error(role, event)
            if not waiting and not unacknowledged:
                settled.set()
            else:
                settled.clear()

        reader = asyncio.create_task(read_events(ws, rec, role, handle))
        try:
            await ws.send(transcription_update())
            for turn in range(every):
                if rec.schedule.over():
                    break
                await send_paced(ws, utterances[next(order)], ASR_RATE, 0.1)
                unacknowledged.append(time.monotonic())
                settled.clear()
                await ws.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": f"commit_{turn}"}))
                tally.sent += 1
                await asyncio.sleep(0.8)  # a pause between utterances
            if not await wait_for(settled, reader, DRAIN_S):
                rec.note(f"{role} #{index}: {len(waiting) + len(unacknowledged)} items unanswered at close")
        finally:
            await finish(ws, reader)

    await reconnecting(url, rec, role, index, session)


def flores_sentences(path: Path, most_words: int = 40) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [row["eng_Latn"] for row in rows if len(row["eng_Latn"].split()) <= most_words]


class MTSession:
    """One MT connection's state: what was sent when, what is still owed."""

    def __init__(self, rec: Recorder, tally: Tally) -> None:
        self.rec = rec
        self.tally = tally
        self.began = time.monotonic()
        self.seq = 0
        self.last_seq = -1
        self.sent_at: dict[int, tuple[float, bool]] = {}  # seq → (when, final)
        self.finals_open = 0
        self.forced = 0
        self.ok = False
        self.ready = asyncio.Event()
        self.answered = asyncio.Event()  # the newest update has its translation
        self.answered.set()
        self.settled = asyncio.Event()  # every final has its translation
        self.settled.set()
        self.sources: dict[int, str] = {}
        self.finals: dict[int, str] = {}

    def handle(self, now: float, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "init_ok":
            self.ok = True
            self.ready.set()
        elif kind == "error":
            self.ready.set()
        elif kind == "translation":
            seq = int(event["seq"])
            if (sent := self.sent_at.pop(seq, None)) is not None:
                at, final = sent
                self.rec.latency("mt final" if final else "mt partial", at, now - at)
            if event.get("final"):
                self.tally.answered += 1
                self.finals[int(event["utterance_id"])] = str(event["committed_text"])
                self.finals_open -= 1
                if self.finals_open <= 0:
                    self.settled.set()
            if event.get("forced_final"):
                self.forced += 1
            if seq >= self.last_seq:
                self.answered.set()

    def update(self, words: list[str], ends: list[float], utterance: int, arrived: int, final: bool) -> str:
        """The update of the utterance's first `arrived` words (the next two as the tail)."""
        now = time.monotonic()
        # Word k was heard ending at its arrival, 0.3 s long; the clock is at least that.
        committed = [
            [w, max(0.0, ends[k] * 1000 - 300), ends[k] * 1000] for k, w in enumerate(words[:arrived])
        ]
        clock = max((now - self.began) * 1000, ends[arrived - 1] * 1000 if arrived else 0.0)
        update: dict[str, Any] = {
            "type": "update",
            "seq": self.seq,
            "utterance_id": utterance,
            "words": committed,
            "clock_ms": clock,
            "is_final": final,
        }
        if not final and words[arrived : arrived + 2]:
            update["tail"] = {"words": [[w, None, None] for w in words[arrived : arrived + 2]]}
        self.sent_at[self.seq] = (now, final)
        self.last_seq = self.seq
        self.seq += 1
        self.answered.clear()
        if final:
            self.finals_open += 1
            self.settled.clear()
            self.tally.sent += 1
            self.tally.accepted += 1
        return json.dumps(update)


async def translator(
    url: str, rec: Recorder, index: int, sentences: Sequence[str], every: int, words_per_s: float = 2.6
) -> None:
    role = "mt"
    target = ("de", "it", "zh")[index % 3]
    order = itertools.islice(itertools.cycle(sentences), index * 7, None)
    history: list[list[str]] = []

    async def say(ws: ClientConnection, mt: MTSession, reader: asyncio.Task[None], utterance: int) -> None:
        """One sentence, word by word: one update in flight, ≥ 0.5 s apart, then its final."""
        sentence = next(order)
        mt.sources[utterance] = sentence
        words = sentence.split()
        start = time.monotonic() - mt.began
        ends = [start + (k + 1) / words_per_s for k in range(len(words))]
        sent_words = 0
        last = 0.0
        forced = mt.forced
        while True:
            if not await wait_for(mt.answered, reader, 30):
                if reader.done():
                    raise ConnectionClosed(None, None)
                rec.note(f"{role} #{index}: no translation in 30 s for seq {mt.last_seq}")
            due = max(last + 0.5, mt.began + ends[min(sent_words, len(words) - 1)])
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if mt.forced != forced:  # the server closed the utterance itself
                rec.note(f"{role} #{index}: forced_final in utterance {utterance}")
                return
            arrived = sum(mt.began + e <= time.monotonic() + 1e-3 for e in ends)
            last = time.monotonic()
            if arrived >= len(words):
                await ws.send(mt.update(words, ends, utterance, len(words), final=True))
                return
            await ws.send(mt.update(words, ends, utterance, arrived, final=False))
            sent_words = arrived

    async def session(ws: ClientConnection, tally: Tally) -> None:
        mt = MTSession(rec, tally)
        reader = asyncio.create_task(read_events(ws, rec, role, mt.handle))
        try:
            init = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": target}
            await ws.send(json.dumps(init | {"history": history[-2:]}))
            if not await wait_for(mt.ready, reader, 60) or not mt.ok:
                rec.note(f"{role} #{index}: no init_ok")
                await asyncio.sleep(2)
                return
            for utterance in range(every):
                if rec.schedule.over():
                    break
                await say(ws, mt, reader, utterance)
            if not await wait_for(mt.settled, reader, DRAIN_S):
                rec.note(f"{role} #{index}: {mt.finals_open} finals unanswered at close")
            if mt.finals:
                newest = max(mt.finals)
                history.append([mt.sources[newest], mt.finals[newest]])
        finally:
            await finish(ws, reader)

    await reconnecting(url, rec, role, index, session)


async def agent(
    url: str, rec: Recorder, index: int, speech: Sequence[Audio], every: int, spoken_every: int = 3
) -> None:
    role = "agent"
    questions = itertools.cycle(QUESTIONS)
    spoken = itertools.cycle(speech)
    pause = np.zeros(int(1.2 * AGENT_RATE), dtype=np.float32)
    turns = itertools.count(1)
    settings = {
        "type": "realtime",
        "instructions": AGENT_INSTRUCTIONS,
        "output_modalities": ["text"],
        "max_output_tokens": 60,
    }

    async def session(ws: ClientConnection, tally: Tally) -> None:
        done = asyncio.Event()
        updated = asyncio.Event()

        def handle(now: float, event: dict[str, Any]) -> None:
            kind = event["type"]
            if kind in ("session.updated", "error") and not updated.is_set():
                updated.set()
            elif kind == "response.created":
                tally.accepted += 1
            elif kind == "response.done":
                tally.answered += 1
                rec.statuses[str(event["response"]["status"])] += 1
                done.set()

        reader = asyncio.create_task(read_events(ws, rec, role, handle))
        try:
            await ws.send(json.dumps({"type": "session.update", "session": settings}))
            await wait_for(updated, reader, 60)
            for _ in range(every):
                if rec.schedule.over():
                    break
                done.clear()
                if next(turns) % spoken_every == 0:
                    kind = "agent spoken"
                    at = await send_paced(ws, next(spoken), AGENT_RATE, 0.2)
                    tally.sent += 1  # server VAD ends the turn and creates the response
                    await send_paced(ws, pause, AGENT_RATE, 0.2)
                else:
                    kind = "agent text"
                    text = {"type": "input_text", "text": next(questions)}
                    item = {"type": "message", "role": "user", "content": [text]}
                    await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
                    at = time.monotonic()
                    create = {"type": "response.create", "response": {"output_modalities": ["text"]}}
                    await ws.send(json.dumps(create))
                    tally.sent += 1
                if await wait_for(done, reader, 120):
                    rec.latency(kind, at, time.monotonic() - at)
                elif reader.done():
                    raise ConnectionClosed(None, None)
                else:
                    rec.note(f"{role} #{index}: no response.done in 120 s ({kind})")
                await asyncio.sleep(1.0)  # the user reads the answer
        finally:
            await finish(ws, reader)

    await reconnecting(url, rec, role, index, session)
