"""Mouth-to-ear latency over WebRTC, next to WebSocket's in the same run: `python -m bench.webrtc_latency`.

    --questions 8      spoken questions (default 8; each is asked over both transports)

A real `dragoman serve --services agent` on a free 127.0.0.1 port, one pipeline unit, no
STUN server (loopback needs none). Each English recording of ../shared/eval (shortest
first, as bench/agent_latency.py picks them) is asked once over each transport, in
alternating order, each in a new session with `server_vad`:

- **WebRTC**: an aiortc caller (harness/webrtc_client.py) speaks it at real time on its
  Opus microphone track. Mouth: the moment the last sample Silero scores as speech left
  the microphone track. Ear: the arrival, from the caller's jitter buffer, of the first
  frame of the answer's track with a sample above -60 dBFS, plus that sample's place in
  the frame. Also timed: `output_audio_buffer.started` on the data channel.
- **WebSocket**: bench/agent_client.py's client, 100 ms appends at real time. Mouth: the
  same end of speech on the appends' schedule; ear: the first answer delta's arrival plus
  the silence before its first sample above -60 dBFS (its `first_sound`).

Both ears are the moment a client could first play the answer: WebRTC's includes the
server's 20 ms pacing, Opus and the caller's jitter buffer; WebSocket's includes none of
them (a client's own playout buffer comes after it). Progress goes to stderr, markdown to
stdout. The machines are shared 2-core ones: compare figures of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soxr

from bench import server as dragoman_server
from bench.agent_client import WIRE_RATE, Utterance, pool_idle, questions
from bench.agent_turn import ANSWER_TIMEOUT_S, ask
from bench.report import header, log, percentile, table
from dragoman.audio.vad import SileroModel
from dragoman.config import default_cache_dir
from dragoman.weights import resolve
from harness.server import Server
from harness.webrtc_client import RATE, Caller

#: A sample above -60 dBFS is sound (bench/agent_turn.py's `first_sound`).
SOUND_PEAK = 32 / 32768


@dataclass
class Result:
    transport: str
    name: str
    #: Seconds from the end of speech: the answer first heard, and (WebRTC) its `started` event.
    ear: float = float("nan")
    started: float = float("nan")
    error: str = ""
    notes: list[str] = field(default_factory=list)


def first_sound(caller: Caller, after: float) -> float | None:
    """When the answer's track is first heard after `after` (monotonic seconds)."""
    for heard in caller.heard:
        if heard.at <= after:
            continue
        loud = np.flatnonzero(np.abs(heard.samples) > SOUND_PEAK)
        if len(loud):
            return heard.at + int(loud[0]) / RATE
    return None


async def ask_webrtc(srv: Server, question: Utterance) -> Result:
    result = Result("WebRTC", question.name)
    await pool_idle(srv.http)
    caller = Caller(srv.http)
    try:
        response = await caller.call()
        if response.status_code != 201:
            result.error = f"HTTP {response.status_code}"
            return result
        await caller.until(lambda e: e["type"] == "session.created", 60)
        caller.microphone.say(np.asarray(soxr.resample(question.audio, WIRE_RATE, RATE), dtype=np.float32))
        done = await caller.until(lambda e: e["type"] == "response.done", ANSWER_TIMEOUT_S + question.end_s)
        await caller.until(lambda e: e["type"] == "output_audio_buffer.stopped", 60)
        end = caller.microphone.began[0] + question.end_s
        heard = first_sound(caller, end)
        if heard is not None:
            result.ear = heard - end
        started = [e for e in caller.of("output_audio_buffer.started") if caller.time_of(e) > end]
        if started:
            result.started = caller.time_of(started[0]) - end
        if done["response"]["status"] != "completed":
            result.notes.append(done["response"]["status"])
    except TimeoutError:
        result.error = f"no answer; last events: {caller.kinds()[-4:]}"
    finally:
        if caller.location is not None:
            await caller.hang_up()
        await caller.close()
    return result


async def ask_websocket(srv: Server, question: Utterance) -> Result:
    turn = await ask(srv, "server_vad", {"type": "server_vad"}, question)
    result = Result("WebSocket", question.name, error=turn.error)
    result.ear = turn.at.get("first_sound", float("nan"))
    return result


async def run(count: int, workdir: Path) -> list[Result]:
    vad = SileroModel.load(resolve("silero-vad", default_cache_dir()))
    chosen = questions(vad)[:count]
    os.environ["DRAGOMAN_ICE_SERVERS"] = "[]"  # the server inherits it
    args = ["serve", "--services", "agent", "--num-pipelines", "1", "--log-level", "info"]
    results: list[Result] = []
    with dragoman_server.running(args, workdir / "dragoman.log") as srv:
        for index, question in enumerate(chosen):
            order = (ask_webrtc, ask_websocket) if index % 2 == 0 else (ask_websocket, ask_webrtc)
            for asker in order:
                result = await asker(srv, question)
                results.append(result)
                log(f"{result.transport:9} {question.name}: ear {1000 * result.ear:.0f} ms {result.error}")
    return results


def report(results: list[Result]) -> None:
    print("## Mouth-to-ear: end of the user's speech to the answer first heard, ms\n")
    rows = []
    for transport in ("WebRTC", "WebSocket"):
        ears = [r.ear for r in results if r.transport == transport]
        heard = [e for e in ears if e == e]
        p50, p95 = percentile(heard, 50), percentile(heard, 95)
        rows.append([transport, len(ears), len(heard), 1000 * p50, 1000 * p95])
    print(table(["transport", "questions", "answered", "p50", "p95"], rows, whole=True))
    started = [r.started for r in results if r.transport == "WebRTC" and r.started == r.started]
    print(
        f"\nWebRTC `output_audio_buffer.started` on the data channel: p50 {1000 * percentile(started, 50):.0f} ms "
        f"after the end of speech (the track's sound follows it by Opus, pacing and the jitter buffer).\n"
    )
    print("<details><summary>Each question</summary>\n")
    detail = [
        [r.transport, r.name, 1000 * r.ear, 1000 * r.started, " ".join([r.error, *r.notes])] for r in results
    ]
    print(table(["transport", "question", "ear", "started event", "notes"], detail, whole=True))
    print("\n</details>\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.webrtc_latency", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--questions", type=int, default=8, help="spoken questions, each over both transports"
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    header("Mouth-to-ear latency, WebRTC and WebSocket")
    print("Server: `dragoman serve --services agent --num-pipelines 1`, defaults.\n")
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-") as tmp:
        results = asyncio.run(run(args.questions, Path(tmp)))
    report(results)
    load_avg = os.getloadavg()
    print(f"Finished in {time.perf_counter() - began:.0f} s; load average at the end {load_avg[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
