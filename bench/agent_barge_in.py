"""The voice agent's barge-in reaction, section 2 of `python -m bench.agent_latency`.

The storyteller instructions and a text request make a long answer; at its first audio
delta the client speaks a short recording at real time. From the interruption's first
sample (and from its speech onset, by Silero) to `input_audio_buffer.speech_started`, to
`response.done` (cancelled, `turn_detected`) and to the last audio delta of the cut response.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass

from bench.agent_client import WIRE_RATE, Utterance, open_client, pool_idle, speak
from bench.agent_turn import ANSWER_TIMEOUT_S, ms
from bench.report import log, percentile, table
from harness.server import Server

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
