"""The soak's interpreter client (`python -m bench.soak --interpreter N`).

A speaker who talks on and on: `/v1/realtime/translations` (OpenAI's translation session),
English recordings at real-time pace in 200 ms appends of 24 kHz PCM16, each followed by
`PAUSE_S` of silence sent as audio ("Silence between phrases keeps arriving as audio"),
`every` recordings a session, then `session.close` and its `session.closed`. The target
language turns over de, it, zh with each session.

What arrives is placed in the window of the recording being spoken when it came, from the
recording's first append to the next one's (the last window runs to `session.closed`); but
translated text that comes while an earlier recording that was heard has none yet is that
one's: the translation follows the order of the speech, and under load it may come after the
next recording began (its end lag then counts to its first late text). Per recording:

* latency `interpreter first text`: its speech began (its first 200 ms append goes when a
  microphone would have that frame) → its first translated text;
* latency `interpreter end lag`: its last append → its last translated text;
* the tally: sent (recordings), acknowledged (some source transcript came in its window),
  answered (some translated text came); a recording heard but never translated is lost.

Translated audio must stay on the input's clock: no kind of delta's `elapsed_ms` goes back, and a session
speaks at most as long as it listened (output audio seconds / input seconds, reported).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection

from bench.audio import Audio
from bench.soak_connection import DRAIN_S, finish, read_events, reconnecting, send_paced, wait_for
from bench.soak_recorder import Recorder, Tally

RATE = 24_000
FRAME_S = 0.2
PAUSE_S = 5.0
TARGETS = ("de", "it", "zh")
MODEL = "gpt-realtime-translate"
APPEND = "session.input_audio_buffer.append"


@dataclass
class Window:
    """One recording's span of the session and what arrived in it (monotonic seconds)."""

    began: float
    speech_end: float | None = None
    source_chars: int = 0
    text: str = ""
    first_text: float | None = None
    last_text: float | None = None


@dataclass
class InterpreterSession:
    """One translation connection's windows and the checks on its output audio."""

    rec: Recorder
    tally: Tally
    windows: list[Window] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    audio_out_s: float = 0.0
    audio_in_s: float = 0.0
    #: The newest `elapsed_ms` of each kind of delta, and the deltas that came with an older one.
    last_elapsed_ms: dict[str, int] = field(default_factory=dict)
    clock_went_back: Counter[str] = field(default_factory=Counter)

    def begin(self, now: float) -> Window:
        window = Window(now)
        self.windows.append(window)
        self.tally.sent += 1
        return window

    def handle(self, now: float, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("session.created", "session.updated"):
            self.ready.set()
        elif kind == "session.closed":
            self.closed.set()
        elif kind == "error":
            self.ready.set()  # an update refused: the session goes on with what it has
        if not kind or not kind.endswith(".delta"):
            return
        elapsed = int(event.get("elapsed_ms", 0))
        if elapsed < self.last_elapsed_ms.get(kind, -1):
            self.clock_went_back[kind] += 1
        self.last_elapsed_ms[kind] = max(self.last_elapsed_ms.get(kind, -1), elapsed)
        if kind == "session.output_audio.delta":
            self.audio_out_s += (
                len(base64.b64decode(event["delta"])) / 2 / int(event.get("sample_rate", RATE))
            )
            return
        if not self.windows:
            return
        window = self.windows[-1]
        if kind == "session.input_transcript.delta":
            window.source_chars += len(event["delta"].strip())
        elif kind == "session.output_transcript.delta" and event["delta"].strip():
            # The translation comes in the order of the speech: text while an earlier recording
            # that was heard has none yet is that one's, come late (a load past the pause).
            window = next((w for w in self.windows if w.source_chars and w.first_text is None), window)
            window.text += event["delta"]
            window.first_text = window.first_text if window.first_text is not None else now
            window.last_text = now

    def settle(self) -> list[str]:
        """Tally the windows and record their latencies; a line for each recording lost."""
        lost = []
        for k, window in enumerate(self.windows):
            if window.source_chars:
                self.tally.accepted += 1
            if window.first_text is not None and window.last_text is not None:
                self.tally.answered += 1
                self.rec.latency("interpreter first text", window.began, window.first_text - window.began)
                if window.speech_end is not None:
                    self.rec.latency(
                        "interpreter end lag", window.began, window.last_text - window.speech_end
                    )
            elif window.source_chars:
                lost.append(f"recording {k} heard ({window.source_chars} characters) but never translated")
        return lost


async def interpreter(url: str, rec: Recorder, index: int, recordings: Sequence[Audio], every: int) -> None:
    """One speaker, reconnecting every `every` recordings, until the run is over."""
    role = "interpreter"
    order = itertools.islice(itertools.cycle(range(len(recordings))), index * 5, None)
    pause = np.zeros(int(RATE * PAUSE_S), np.float32)
    sessions = itertools.count(index)

    async def session(ws: ClientConnection, tally: Tally) -> None:
        state = InterpreterSession(rec, tally)
        target = TARGETS[next(sessions) % len(TARGETS)]
        reader = asyncio.create_task(read_events(ws, rec, role, state.handle))
        try:
            update = {
                "type": "session.update",
                "session": {
                    "audio": {
                        "output": {"language": target},
                        "input": {"transcription": {"model": "whisper"}},
                    }
                },
            }
            await ws.send(json.dumps(update))
            if not await wait_for(state.ready, reader, 60):
                rec.note(f"{role} #{index}: no session.updated")
                return
            for _ in range(every):
                if rec.schedule.over():
                    break
                audio = recordings[next(order)]
                window = state.begin(time.monotonic())
                window.speech_end = await send_paced(ws, audio, RATE, FRAME_S, kind=APPEND)
                state.audio_in_s += len(audio) / RATE + PAUSE_S
                await send_paced(ws, pause, RATE, FRAME_S, kind=APPEND)
            await ws.send(json.dumps({"type": "session.close"}))
            if not await wait_for(state.closed, reader, DRAIN_S):
                rec.note(f"{role} #{index}: no session.closed in {DRAIN_S:.0f} s after session.close")
        finally:
            await finish(ws, reader)
            for line in state.settle():
                rec.note(f"{role} #{index} ({target}): {line}")
            if state.clock_went_back:
                rec.note(f"{role} #{index}: elapsed_ms went back: {dict(state.clock_went_back)}")
            if state.audio_in_s:
                rec.ratios["interpreter audio out / in"].append(state.audio_out_s / state.audio_in_s)

    await reconnecting(url, rec, role, index, session)
