"""File transcription throughput: one long file through `POST /v1/audio/transcriptions` against
the same audio streamed through a Realtime transcription session, on one real server.

The file is English eval recordings with a human reference, concatenated (0.6 s pauses
between them, repeated as needed) up to `--minutes`. It is sent once as flac through the
`openai` SDK; the server decodes it, cuts it at pauses and batches its windows. The same
audio is then streamed as one session as fast as the server takes it: each recording one
item (appended in 100 ms pieces, then committed), the next appended at once (or, with 8
items waiting for their transcripts, the session's bound, after the next one), and the run
ends with the last `.completed`. Throughput is audio seconds per wall second; WER is the
corpus WER of the whole text against the references (`dragoman.tools.wer`).

    .venv/bin/python -m bench.file_transcription --minutes 10
    .venv/bin/python -m bench.file_transcription --minutes 1      # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from openai import OpenAI
from websockets.asyncio.client import connect

from bench.asr_load import COMPLETED, FAILED, PIECE_SECONDS
from bench.audio import RATE, Audio, b64, eval_rows, load
from bench.report import log, table
from bench.server import running
from dragoman.cpu import cpu_info
from dragoman.sessions.speech.front import MAX_PENDING_ITEMS
from dragoman.tools.wer import wer
from harness.audio_files import encode

PAUSE_SECONDS = 0.6


@dataclass(frozen=True)
class LongFile:
    parts: list[Audio]
    references: list[str]

    @property
    def audio(self) -> Audio:
        pause = np.zeros(int(PAUSE_SECONDS * RATE), dtype=np.float32)
        return np.concatenate([piece for part in self.parts for piece in (part, pause)])

    @property
    def seconds(self) -> float:
        return len(self.audio) / RATE


def build(minutes: float) -> LongFile:
    """English recordings with a human reference, at most 30 s each, up to `minutes`."""
    rows = [r for r in eval_rows("en") if r.reference.strip() and not r.weak and r.duration <= 30.0]
    pool = [(load(r), r.reference) for r in rows]
    parts: list[Audio] = []
    refs: list[str] = []
    total = 0.0
    while total < minutes * 60:
        for audio, ref in pool:
            parts.append(audio)
            refs.append(ref)
            total += len(audio) / RATE + PAUSE_SECONDS
            if total >= minutes * 60:
                break
    return LongFile(parts, refs)


@dataclass(frozen=True)
class Run:
    mode: str
    wall: float
    text: str
    #: Windows the file was cut into (verbose_json only), or the session's items.
    pieces: float


def run_file(base: str, long: LongFile, response_format: Literal["json", "verbose_json"]) -> Run:
    """One request; `verbose_json` adds the alignment pass that times its sentence segments."""
    client = OpenAI(base_url=base + "/v1", api_key="local", max_retries=0, timeout=3600)
    data = encode(long.audio, RATE, "flac")
    began = time.monotonic()
    raw = client.audio.transcriptions.with_raw_response.create(
        file=("long.flac", data), model="whisper-1", language="en", response_format=response_format
    )
    wall = time.monotonic() - began
    body = json.loads(raw.http_response.text)
    windows = len({s["seek"] for s in body.get("segments", [])}) or float("nan")
    return Run(f"file endpoint, {response_format}", wall, body["text"], windows)


async def run_stream(ws_base: str, long: LongFile) -> Run:
    url = ws_base + "/v1/realtime?intent=transcription"
    update = {
        "type": "session.update",
        "session": {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "transcription": {"language": "en"},
                    "turn_detection": None,
                }
            },
        },
    }
    transcripts: dict[str, str] = {}
    order: list[str] = []
    answered = asyncio.Event()
    async with connect(url, max_size=None, ping_interval=None, open_timeout=60) as ws:
        await ws.recv()  # session.created
        await ws.send(json.dumps(update))
        began = time.monotonic()

        async def read() -> None:
            async for message in ws:
                event: dict[str, Any] = json.loads(message)
                if event["type"] == "input_audio_buffer.committed":
                    order.append(event["item_id"])
                elif event["type"] in (COMPLETED, FAILED):
                    transcripts[event["item_id"]] = event.get("transcript", "")
                    answered.set()
                    if len(transcripts) == len(long.parts):
                        return
                elif event["type"] == "error":
                    raise RuntimeError(f"session error: {event['error']}")

        reader = asyncio.create_task(read())
        step = int(PIECE_SECONDS * RATE)
        for committed, part in enumerate(long.parts):
            # The session refuses audio past MAX_PENDING_ITEMS committed items still waiting
            # for their transcripts: as fast as the server takes it means staying under that.
            while committed - len(transcripts) >= MAX_PENDING_ITEMS and not reader.done():
                answered.clear()
                await asyncio.wait(
                    [reader, asyncio.ensure_future(answered.wait())], return_when="FIRST_COMPLETED"
                )
            for i in range(0, len(part), step):
                await ws.send(
                    json.dumps({"type": "input_audio_buffer.append", "audio": b64(part[i : i + step])})
                )
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        await asyncio.wait_for(reader, timeout=3600)
        wall = time.monotonic() - began
    return Run("realtime session", wall, " ".join(transcripts[i] for i in order), len(order))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--model", default="whisper-base")
    args = parser.parse_args(argv)
    long = build(args.minutes)
    log(f"{long.seconds:.0f} s of audio from {len(long.parts)} recordings")
    serve = ["serve", "--services", "transcription", "--asr-model", args.model]
    with tempfile.TemporaryDirectory() as tmp, running(serve, Path(tmp) / "dragoman.log") as server:
        runs = []
        formats: tuple[Literal["json", "verbose_json"], ...] = ("json", "verbose_json")
        for response_format in formats:
            log(f"file endpoint, {response_format}")
            runs.append(run_file(server.http, long, response_format))
        log("realtime session")
        runs.append(asyncio.run(run_stream(server.ws, long)))
    reference = " ".join(long.references)
    print(f"## File transcription throughput ({args.model}, {long.seconds:.0f} s of audio)\n")
    load_avg = os.getloadavg()
    print(
        f"{cpu_info().describe()}; load average at start {load_avg[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}.\n"
    )
    rows = [
        [
            r.mode,
            f"{long.seconds:.0f}",
            f"{r.wall:.1f}",
            f"{long.seconds / r.wall:.2f}",
            r.pieces,
            wer([reference], [r.text]),
        ]
        for r in runs
    ]
    print(table(["path", "audio s", "wall s", "audio s / wall s", "windows or items", "WER"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
