"""Concurrent Realtime transcription sessions against a real server, fed at real-time pace.

Each session is a plain `websockets` client (not the openai SDK: the clients share
the server's two cores, and the SDK's per-event pydantic parsing would take CPU from
the server it is measuring). It opens `/v1/realtime?intent=transcription`, sets
16 kHz pcm and the chunk settings with a GA `session.update`, appends its audio in
100 ms pieces on a wall-clock schedule, commits, and waits for the completed event.
Session starts are spread over one chunk, as independent clients would be.

Lag of a partial = the time it arrived − the time the audio up to its
`audio_seconds` had been sent; a session keeps up when its steps lag less than one
chunk. The same lag is also measured from the chunk boundary at or before
`audio_seconds` (the audio a step starts from when the server keeps up), which does
not depend on which clock the server reports in `audio_seconds`. Throughput counts
every step the server reported (partials and completions) and the audio each one
decoded (the whole item so far).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from bench.audio import RATE, Audio, SessionInput, b64
from dragoman.tools.wer import wer

PIECE_SECONDS = 0.1
PARTIAL = "mstar.transcription.partial"
DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"
FAILED = "conversation.item.input_audio_transcription.failed"
SPEECH_STARTED = "input_audio_buffer.speech_started"
COMMITTED = "input_audio_buffer.committed"


@dataclass(frozen=True)
class StreamSettings:
    chunk_seconds: float = 2.0
    unfixed_chunks: int = 2
    unfixed_tokens: int = 5
    language: str = "en"
    #: "server_vad": the server cuts the items at pauses; None: the client commits each one.
    turn_detection: str | None = None

    def update_event(self) -> dict[str, Any]:
        turns = {"type": self.turn_detection} if self.turn_detection else None
        return {
            "type": "session.update",
            "session": {
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": RATE},
                        "transcription": {"language": self.language},
                        "turn_detection": turns,
                    }
                },
                "mstar": {
                    "chunk_seconds": self.chunk_seconds,
                    "unfixed_chunks": self.unfixed_chunks,
                    "unfixed_tokens": self.unfixed_tokens,
                    # The partial hypotheses this bench times go out only when asked for.
                    "partials": True,
                },
            },
        }


@dataclass
class Trace:
    """What one session sent and received, with monotonic timestamps."""

    name: str
    #: None when the item is a window cut out of a longer recording.
    reference: str | None
    seconds: float
    chunk_seconds: float
    #: (16 kHz samples sent so far, when) after each append.
    sent: list[tuple[int, float]] = field(default_factory=list)
    received: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    #: When the client committed (its last item's commit).
    committed: float = 0.0
    #: The server commits the items (server_vad): a final's lag runs from its
    #: `input_audio_buffer.committed`, and an item's audio starts at its speech_started.
    server_commits: bool = False

    def sent_at(self, audio_seconds: float) -> float:
        """When the audio up to `audio_seconds` had been sent (the commit, for the tail)."""
        need = round(audio_seconds * RATE)
        counts = [count for count, _ in self.sent]
        index = bisect.bisect_left(counts, need)
        return self.sent[index][1] if index < len(self.sent) else self.committed

    def of(self, kind: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, e) for t, e in self.received if e["type"] == kind]

    def item_start(self, item_id: str) -> float:
        """Where an item's audio starts on the session's timeline, in seconds."""
        for _, e in self.of(SPEECH_STARTED):
            if e["item_id"] == item_id:
                return float(e["audio_start_ms"]) / 1000
        return 0.0

    @property
    def partial_lags(self) -> list[float]:
        return [
            t - self.sent_at(self.item_start(e["item_id"]) + e["audio_seconds"]) for t, e in self.of(PARTIAL)
        ]

    @property
    def boundary_lags(self) -> list[float]:
        """Lag behind the chunk boundary at or before each partial's `audio_seconds`."""
        chunk = self.chunk_seconds
        lags = []
        for t, e in self.of(PARTIAL):
            boundary = math.floor(e["audio_seconds"] / chunk + 1e-6) * chunk
            lags.append(t - self.sent_at(self.item_start(e["item_id"]) + boundary))
        return lags

    @property
    def final_lags(self) -> list[float]:
        """Commit → completed, for each completed item."""
        commits = {e["item_id"]: t for t, e in self.of(COMMITTED)}
        lags = []
        for t, e in self.of(COMPLETED):
            committed = commits.get(e["item_id"]) if self.server_commits else self.committed
            if committed is not None:
                lags.append(t - committed)
        return lags

    @property
    def transcript(self) -> str:
        """The completed items' transcripts, in order."""
        return " ".join(str(e["transcript"]).strip() for _, e in self.of(COMPLETED)).strip()

    @property
    def revised(self) -> bool:
        """An item's deltas are not a prefix of its final transcript (a revision reached sent text)."""
        for _, done in self.of(COMPLETED):
            deltas = "".join(e["delta"] for _, e in self.of(DELTA) if e["item_id"] == done["item_id"])
            if not str(done["transcript"]).startswith(deltas):
                return True
        return False


@dataclass
class LoadResult:
    sessions: int
    max_batch: int | None
    traces: list[Trace]
    wall: float
    errors: list[dict[str, Any]]
    #: Partial steps the server skipped under load (`dragoman_transcription_steps_coalesced_total`).
    coalesced: int = 0

    def lags(self) -> list[float]:
        return [lag for trace in self.traces for lag in trace.partial_lags]

    def boundary_lags(self) -> list[float]:
        return [lag for trace in self.traces for lag in trace.boundary_lags]

    def first_lags(self) -> list[float]:
        return [trace.boundary_lags[0] for trace in self.traces if trace.boundary_lags]

    def final_lags(self) -> list[float]:
        return [lag for trace in self.traces for lag in trace.final_lags]

    @property
    def steps(self) -> int:
        return sum(len(t.of(PARTIAL)) + len(t.of(COMPLETED)) for t in self.traces)

    @property
    def audio_decoded(self) -> float:
        """Seconds of audio the server's steps decoded (each step decodes its whole item so far)."""
        partial = sum(e["audio_seconds"] for t in self.traces for _, e in t.of(PARTIAL))
        final = sum(e["usage"]["seconds"] for t in self.traces for _, e in t.of(COMPLETED))
        return float(partial + final)

    @property
    def completed(self) -> int:
        return sum(bool(t.of(COMPLETED)) for t in self.traces)

    @property
    def revised(self) -> int:
        return sum(t.revised for t in self.traces if t.of(COMPLETED))

    def wer(self) -> float:
        """Corpus WER of the completed items that are whole recordings."""
        scored = [(t.reference, t.transcript) for t in self.traces if t.of(COMPLETED) and t.reference]
        if not scored:
            return float("nan")
        return wer([r for r, _ in scored], [h for _, h in scored])


async def open_session(url: str, settings: StreamSettings) -> ClientConnection:
    # No keepalive pings: a busy server must not have the benchmark's sessions closed on it.
    ws = await connect(url, max_size=None, ping_interval=None, open_timeout=60)
    await _expect(ws, "session.created")
    await ws.send(json.dumps(settings.update_event()))
    await _expect(ws, "session.updated")
    return ws


async def _expect(ws: ClientConnection, kind: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await ws.recv())
    if event["type"] != kind:
        raise RuntimeError(f"expected {kind}, got {event}")
    return event


async def _session(
    ws: ClientConnection, audio: Audio, trace: Trace, start_at: float, errors: list[dict[str, Any]]
) -> None:
    step = int(PIECE_SECONDS * RATE)
    payloads = [
        json.dumps({"type": "input_audio_buffer.append", "audio": b64(audio[i : i + step])})
        for i in range(0, len(audio), step)
    ]

    async def read() -> None:
        async for message in ws:
            event: dict[str, Any] = json.loads(message)
            trace.received.append((time.monotonic(), event))
            if event["type"] == "error":
                errors.append(event["error"])
            if event["type"] in (COMPLETED, FAILED):
                return

    reader = asyncio.create_task(read())
    try:
        count = 0
        for index, payload in enumerate(payloads):
            # Each piece goes once its audio would have been recorded, on an absolute
            # schedule so that a late wake-up does not push every later append back.
            await asyncio.sleep(max(0.0, start_at + (index + 1) * PIECE_SECONDS - time.monotonic()))
            await ws.send(payload)
            count = min(len(audio), count + step)
            trace.sent.append((count, time.monotonic()))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        trace.committed = time.monotonic()
        await asyncio.wait_for(reader, timeout=600)
    finally:
        reader.cancel()
        await ws.close()


async def run_load(
    ws_base: str,
    inputs: list[SessionInput],
    settings: StreamSettings,
    max_batch: int | None = None,
) -> LoadResult:
    """Stream every input as one concurrent session; return their traces."""
    url = ws_base + "/v1/realtime?intent=transcription"
    connections = await asyncio.gather(*(open_session(url, settings) for _ in inputs))
    return await drive(connections, inputs, settings, _session, max_batch)


async def drive(
    connections: Sequence[Any],
    inputs: list[SessionInput],
    settings: StreamSettings,
    session: Callable[..., Awaitable[None]],
    max_batch: int | None = None,
) -> LoadResult:
    """Run `session(ws, audio, trace, start_at, errors)` on each open connection at once, their
    starts spread over one chunk so that steps do not all fall due together; their traces."""
    traces = [
        Trace(item.name, item.reference, len(item.audio) / RATE, settings.chunk_seconds) for item in inputs
    ]
    errors: list[dict[str, Any]] = []
    begin = time.monotonic() + 0.5
    spread = settings.chunk_seconds / len(inputs)
    await asyncio.gather(
        *(
            session(ws, item.audio, trace, begin + i * spread, errors)
            for i, (ws, item, trace) in enumerate(zip(connections, inputs, traces, strict=True))
        )
    )
    ends = [t.received[-1][0] for t in traces if t.received]
    wall = (max(ends) if ends else time.monotonic()) - begin
    return LoadResult(len(inputs), max_batch, traces, wall, errors)
