"""The soak's clients (`python -m bench.soak`): well-behaved sessions of each service, and abusers.

Every client is a plain `websockets` client (the openai SDK's per-event pydantic parsing
would take CPU from the server it measures on a 2-core machine) that reconnects: it opens
a new session every `every` utterances, sentences or turns, until the run's end.

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
* Abusers, only in the abuse windows of the `Schedule`: `flooder` (appends and commits
  `speed` × faster than real time), `oversizer` (one frame past `--max-message-bytes`, on
  the transcription and MT endpoints in turn) and `idler` (connects, and then says nothing).
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from bench.audio import Audio, b64

ASR_RATE = 16_000
AGENT_RATE = 24_000
COMMITTED = "input_audio_buffer.committed"
COMPLETED = "conversation.item.input_audio_transcription.completed"
FAILED = "conversation.item.input_audio_transcription.failed"
#: How long a client that leaves waits for the answers it is still owed.
DRAIN_S = 90.0
#: MT codes that mean the server dropped work (the protocol's only server-side failure).
MT_SERVER_CODES = frozenset({"processing_failed"})
QUESTIONS = (
    "Name one colour.",
    "What is two plus two?",
    "Say hello in French.",
    "What is the capital of Italy?",
    "Name a fruit that is yellow.",
    "How many days are in a week?",
)
AGENT_INSTRUCTIONS = "Answer in one short sentence."


@dataclass(frozen=True)
class Schedule:
    """The run's clock: `seconds` from `begin`; with `abuse`, ten windows, calm and abuse in turn.

    Each fifth of the run is then one calm window followed by one abuse window, so the first
    and the last fifth carry the same mix and a calm/abuse comparison spans the whole run.
    """

    begin: float
    seconds: float
    abuse: bool

    @property
    def end(self) -> float:
        return self.begin + self.seconds

    @property
    def window(self) -> float:
        return self.seconds / 10

    def over(self) -> bool:
        return time.monotonic() >= self.end

    def phase(self, at: float) -> str:
        if not self.abuse:
            return "calm"
        return "abuse" if int((at - self.begin) // self.window) % 2 else "calm"

    def fifth(self, at: float) -> int:
        return min(4, max(0, int((at - self.begin) / (self.seconds / 5))))

    async def next_abuse(self) -> tuple[float, float] | None:
        """Sleep until an abuse window is open; its (start, end), or None once the run is over."""
        now = time.monotonic()
        index = max(0, int((now - self.begin) // self.window))
        index += 1 - index % 2  # a calm window: the next one
        start = self.begin + index * self.window
        if not self.abuse or start >= self.end:
            return None
        await asyncio.sleep(max(0.0, start - now))
        return start, min(start + self.window, self.end)


@dataclass(frozen=True)
class Latency:
    kind: str
    #: When the request went (monotonic): it places the sample in a fifth and a phase.
    at: float
    seconds: float


@dataclass
class Tally:
    """One session's requests that must each get their answer (commits, MT finals, responses)."""

    role: str
    sent: int = 0
    #: Acknowledged: `input_audio_buffer.committed`, an MT final sent, `response.created`.
    accepted: int = 0
    answered: int = 0
    failed: int = 0

    @property
    def lost(self) -> int:
        return self.accepted - self.answered - self.failed


@dataclass
class Recorder:
    schedule: Schedule
    latencies: list[Latency] = field(default_factory=list)
    errors: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: Errors the server counts as its own fault (type server_error, MT processing_failed).
    server_errors: Counter[str] = field(default_factory=Counter)
    closes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    connects: Counter[str] = field(default_factory=Counter)
    #: Connections that failed to open, by role and exception.
    refused: Counter[str] = field(default_factory=Counter)
    tallies: list[Tally] = field(default_factory=list)
    #: Seconds from connect to the server's idle close, for the idle abusers.
    idle_closes: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: Agent response statuses.
    statuses: Counter[str] = field(default_factory=Counter)
    #: Per-session ratios worth a line in the report (the interpreter's audio out / in).
    ratios: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: Unexpected happenings worth a line in the report.
    notes: list[str] = field(default_factory=list)

    def latency(self, kind: str, at: float, seconds: float) -> None:
        self.latencies.append(Latency(kind, at, seconds))

    def tally(self, role: str) -> Tally:
        tally = Tally(role)
        self.tallies.append(tally)
        return tally

    def error(self, role: str, event: dict[str, Any]) -> str:
        """Count an error event (a realtime `error`, its `.failed` item, or an MT error); its code."""
        detail = event.get("error") if isinstance(event.get("error"), dict) else event
        assert isinstance(detail, dict)
        code = str(detail.get("code") or detail.get("type") or "?")
        self.errors[role][code] += 1
        if detail.get("type") == "server_error" or code == "server_error" or code in MT_SERVER_CODES:
            self.server_errors[f"{role}: {code}"] += 1
            self.note(f"{role}: {code}: {str(detail.get('message'))[:200]}")
        return code

    def note(self, line: str) -> None:
        if len(self.notes) < 200:
            self.notes.append(f"{time.monotonic() - self.schedule.begin:7.1f} s  {line}")


def close_label(ws: ClientConnection) -> str:
    """Who closed the connection, and with which code."""
    protocol = ws.protocol
    if protocol.close_rcvd is None:
        return "no close frame (1006)"
    code = protocol.close_rcvd.code
    return f"server closed {code}" if protocol.close_rcvd_then_sent else f"client closed ({code})"


async def open_ws(url: str, rec: Recorder, role: str) -> ClientConnection | None:
    try:
        # No keepalive pings: a busy server must not have the soak's sessions closed on it.
        ws = await connect(url, max_size=None, ping_interval=None, open_timeout=60, close_timeout=10)
    except (OSError, WebSocketException, TimeoutError) as exc:
        rec.refused[f"{role}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
        return None
    rec.connects[role] += 1
    return ws


async def read_events(
    ws: ClientConnection, rec: Recorder, role: str, handle: Callable[[float, dict[str, Any]], None]
) -> None:
    """Every event to `handle` (errors counted first) until the connection closes."""
    try:
        async for message in ws:
            event: dict[str, Any] = json.loads(message)
            if event.get("type") == "error":
                rec.error(role, event)
            handle(time.monotonic(), event)
    except ConnectionClosed:
        pass
    finally:
        rec.closes[role][close_label(ws)] += 1


async def finish(ws: ClientConnection, reader: asyncio.Task[None]) -> None:
    await ws.close()
    try:
        await asyncio.wait_for(reader, 15)
    except TimeoutError:
        reader.cancel()


#: The realtime API's append; a translation session's is `session.input_audio_buffer.append`.
APPEND = "input_audio_buffer.append"


def append(audio: Audio, kind: str = APPEND) -> str:
    return json.dumps({"type": kind, "audio": b64(audio)})


async def send_paced(
    ws: ClientConnection, audio: Audio, rate: int, piece_s: float, speed: float = 1.0, kind: str = APPEND
) -> float:
    """Append `audio` in `piece_s` pieces on an absolute schedule, `speed` × real time; when done."""
    step = int(rate * piece_s)
    began = time.monotonic()
    for n, start in enumerate(range(0, len(audio), step)):
        await asyncio.sleep(max(0.0, began + (n + 1) * piece_s / speed - time.monotonic()))
        await ws.send(append(audio[start : start + step], kind))
    return time.monotonic()


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


async def wait_for(event: asyncio.Event, reader: asyncio.Task[None], seconds: float) -> bool:
    """Until `event` is set (True), the connection closes or `seconds` pass (False)."""
    waiter = asyncio.ensure_future(event.wait())
    await asyncio.wait({waiter, reader}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    return event.is_set()


Session = Callable[[ClientConnection, Tally], Awaitable[None]]


async def reconnecting(url: str, rec: Recorder, role: str, index: int, session: Session) -> None:
    """Run `session` on a new connection, again and again, until the run is over."""
    while not rec.schedule.over():
        ws = await open_ws(url, rec, role)
        if ws is None:
            await asyncio.sleep(2)
            continue
        try:
            await session(ws, rec.tally(role))
        except ConnectionClosed:
            rec.note(f"{role} #{index}: connection closed under the client ({close_label(ws)})")
        finally:
            await ws.close()


# -- well-behaved clients ------------------------------------------------------------------------


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


# -- abusers ---------------------------------------------------------------------------------------


async def flooder(url: str, rec: Recorder, index: int, utterances: Sequence[Audio], speed: float) -> None:
    """Appends in 1 s pieces `speed` × faster than real time, a commit after each recording."""
    role = "flooder"
    order = itertools.cycle(utterances)

    async def flood(ws: ClientConnection, tally: Tally, end: float) -> None:
        def handle(now: float, event: dict[str, Any]) -> None:
            if event["type"] == COMMITTED:
                tally.accepted += 1
            elif event["type"] == COMPLETED:
                tally.answered += 1

        reader = asyncio.create_task(read_events(ws, rec, role, handle))
        try:
            await ws.send(transcription_update())
            while time.monotonic() < end and not reader.done():
                await send_paced(ws, next(order), ASR_RATE, 1.0, speed=speed)
                await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
                tally.sent += 1
        finally:
            await finish(ws, reader)  # leaves with its items still queued: the server drops them

    while (window := await rec.schedule.next_abuse()) is not None:
        ws = await open_ws(url, rec, role)
        if ws is None:
            await asyncio.sleep(2)
            continue
        try:
            await flood(ws, rec.tally(role), window[1])
        except ConnectionClosed:
            rec.note(f"{role} #{index}: connection closed under it ({close_label(ws)})")


async def oversizer(realtime_url: str, mt_url: str, rec: Recorder, index: int, limit: int) -> None:
    """One frame past the limit, on the transcription and the MT endpoint in turn."""
    size = limit + 256 * 1024
    attempt = 0
    while (window := await rec.schedule.next_abuse()) is not None:
        _, end = window
        while time.monotonic() < end - 1:
            mt = attempt % 2 == 1
            attempt += 1
            role = "oversize (mt)" if mt else "oversize (transcription)"
            ws = await open_ws(mt_url if mt else realtime_url, rec, role)
            if ws is None:
                await asyncio.sleep(2)
                continue
            reader = asyncio.create_task(read_events(ws, rec, role, lambda now, event: None))
            try:
                if mt:
                    init = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}
                    await ws.send(json.dumps(init))
                    words = [["x" * size, None, None]]
                    frame = {"type": "update", "seq": 0, "utterance_id": 0, "words": words, "clock_ms": 0}
                else:
                    frame = {"type": "input_audio_buffer.append", "audio": "A" * size}
                await ws.send(json.dumps(frame))
                await asyncio.wait_for(asyncio.shield(reader), 30)
            except (ConnectionClosed, TimeoutError):
                pass
            finally:
                if not reader.done():
                    rec.note(f"oversize #{index}: the server kept the connection open for 30 s")
                await finish(ws, reader)
            await asyncio.sleep(3)


async def idler(realtime_url: str, mt_url: str, rec: Recorder, index: int) -> None:
    """Connects (every third on MT, and sends init) and then says nothing; the server should close it."""
    mt = index % 3 == 2
    role = "idle (mt)" if mt else "idle (transcription)"
    while (window := await rec.schedule.next_abuse()) is not None:
        _, end = window
        while time.monotonic() < end - 2:
            ws = await open_ws(mt_url if mt else realtime_url, rec, role)
            if ws is None:
                await asyncio.sleep(2)
                continue
            began = time.monotonic()
            reader = asyncio.create_task(read_events(ws, rec, role, lambda now, event: None))
            try:
                if mt:
                    init = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "it"}
                    await ws.send(json.dumps(init))
                await asyncio.wait_for(asyncio.shield(reader), max(0.1, end - time.monotonic()))
                rec.idle_closes[role].append(time.monotonic() - began)
            except (ConnectionClosed, TimeoutError):
                pass
            finally:
                await finish(ws, reader)
