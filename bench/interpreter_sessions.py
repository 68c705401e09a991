"""The interpreter benchmark's client: each clip through its own translation session of the
openai SDK at real-time pace, timed from the speech as spoken; and the same server's text MT of
the gold transcripts, for the BLEU ratio."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from openai import AsyncOpenAI
from openai.resources.realtime.translations.translations import AsyncTranslationsConnection
from websockets.asyncio.client import connect

from bench.interpreter_clips import WIRE_RATE, Clip
from bench.report import log
from dragoman.audio.pcm import float_to_pcm16
from dragoman.sessions.translation.translator import source_words

FRAME_S = 0.2
TAIL_S = 2.0
#: A session's slot is free once the server has finished its engine work, a moment after
#: `session.closed`; a worker that opens the next one at once may be refused with 1013 ("try
#: again later"), and does as it says, this often, this far apart.
OPEN_TRIES, RETRY_S = 20, 0.25
LIMIT_REACHED = "session_limit_reached"


@dataclass
class Run:
    clip: Clip
    language: str
    text: str = ""
    first_text_s: float = float("nan")
    first_audio_s: float = float("nan")
    end_lag_s: float = float("nan")
    #: When the translated speech, played as it arrives (each chunk after the one before it),
    #: ends, after the clip's speech ended: what a listener waits for the last word.
    speech_end_lag_s: float = float("nan")
    pcm: bytearray = field(default_factory=bytearray)
    heard: str = ""
    #: The source transcript the session sent (`session.input_transcript.delta`).
    source_text: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def audio_s(self) -> float:
        return len(self.pcm) / 2 / WIRE_RATE


@contextlib.asynccontextmanager
async def opened(client: AsyncOpenAI) -> AsyncIterator[AsyncTranslationsConnection]:
    """A translation session past its `session.created`, opened again while the server refuses it
    for its session limit (until a closed session's engine work is done)."""
    for attempt in range(OPEN_TRIES):
        async with client.realtime.translations.connect(model="gpt-realtime-translate") as conn:
            # A refusal is an `error` event, then the 1013 close.
            first = json.loads(await conn.recv_bytes())
            if first["type"] == "session.created":
                yield conn
                return
            if first.get("error", {}).get("code") != LIMIT_REACHED or attempt == OPEN_TRIES - 1:
                raise RuntimeError(f"the session was not opened: {first}")
        await asyncio.sleep(RETRY_S)


async def interpret(client: AsyncOpenAI, clip: Clip, language: str) -> Run:
    run = Run(clip, language)
    audio = np.concatenate([clip.audio, np.zeros(int(TAIL_S * WIRE_RATE), dtype=np.float32)])
    step = int(FRAME_S * WIRE_RATE)
    async with opened(client) as conn:
        # The source transcript too: what the interpreter heard, scored by WER on its own.
        audio_config = {"output": {"language": language}, "input": {"transcription": {"model": "whisper"}}}
        await conn.session.update(session={"audio": audio_config})  # type: ignore[typeddict-item]
        began = time.perf_counter()
        onset, end = began + clip.onset_s, began + clip.end_s
        played_until = began  # where playback of the audio received so far ends

        async def read() -> None:
            nonlocal played_until
            while True:
                event = json.loads(await conn.recv_bytes())
                now = time.perf_counter()
                kind = event["type"]
                if kind == "session.output_transcript.delta":
                    run.text += event["delta"]
                    if run.first_text_s != run.first_text_s:
                        run.first_text_s = now - onset
                    run.end_lag_s = now - end
                elif kind == "session.input_transcript.delta":
                    run.source_text += event["delta"]
                elif kind == "session.output_audio.delta":
                    chunk = base64.b64decode(event["delta"])
                    run.pcm += chunk
                    if run.first_audio_s != run.first_audio_s:
                        run.first_audio_s = now - onset
                    played_until = max(played_until, now) + len(chunk) / 2 / WIRE_RATE
                    run.speech_end_lag_s = played_until - end
                elif kind == "error":
                    run.errors.append(event["error"])
                elif kind == "session.closed":
                    return

        reader = asyncio.create_task(read())
        for index, start in enumerate(range(0, len(audio), step)):
            # Each frame goes out once it has been "recorded".
            await asyncio.sleep(max(0.0, began + (index + 1) * FRAME_S - time.perf_counter()))
            pcm = float_to_pcm16(audio[start : start + step])
            await conn.session.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
        await conn.session.close()
        await asyncio.wait_for(reader, 300)
    return run


async def concurrently(client: AsyncOpenAI, items: Sequence[Clip], language: str, sessions: int) -> list[Run]:
    """Every clip through its own session, `sessions` at a time: each worker takes the next clip
    when its session ends. With fewer clips than sessions the clips repeat, so that `sessions`
    run at once."""
    queue = [items[i % len(items)] for i in range(max(len(items), sessions))]
    runs: list[Run] = []

    async def worker() -> None:
        while queue:
            clip = queue.pop(0)
            run = await interpret(client, clip, language)
            log(
                f"→{language} x{sessions} {clip.name}: {run.text!r} first text {run.first_text_s:.2f} s, "
                f"first audio {run.first_audio_s:.2f} s, end lag {run.end_lag_s:.2f} s, "
                f"spoken end lag {run.speech_end_lag_s:.2f} s; heard {run.source_text!r}"
            )
            runs.append(run)

    await asyncio.gather(*(worker() for _ in range(sessions)))
    return runs


async def offline(ws_url: str, sources: Sequence[str], direction: str) -> list[str]:
    """The same server's text MT of the gold transcripts: one final update per sentence."""
    source, target = direction.split("-")
    out = []
    async with connect(ws_url + "/v1/mt", max_size=None) as ws:
        init = {"type": "init", "protocol_version": 1, "source_lang": source, "target_lang": target}
        await ws.send(json.dumps(init))
        json.loads(await ws.recv())
        for seq, text in enumerate(sources, start=1):
            # Words as the interpreter's translator takes a transcript (Chinese a character each).
            words = [[w, None, None] for w in source_words(text)]
            update = {"type": "update", "seq": seq, "utterance_id": seq, "words": words, "clock_ms": 0.0}
            await ws.send(json.dumps(update | {"is_final": True}))
            while True:
                answer = json.loads(await ws.recv())
                if answer.get("final") and answer.get("seq") == seq:
                    out.append(answer["committed_text"])
                    break
    return out
