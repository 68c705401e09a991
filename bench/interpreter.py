"""The interpreter end to end: `python -m bench.interpreter`.

    --languages de it zh   target languages (default: de)
    --sessions 1 2 4       concurrent sessions (default: 1 2)
    --clips 12             English clips of ../shared/eval/speech_translation.tsv (default: all; it
                           has 6: 5 FLEURS with FLORES references, 1 CoVoST 2)
    --url http://...       a running server (default: start `dragoman serve --services interpreter mt`)

Each clip is one translation session through the openai SDK's
`client.realtime.translations.connect()`, streamed at real-time pace in 200 ms appends
(each sent once its 200 ms have been "recorded"), then 2 s of silence, then
`session.close`; the session ends at `session.closed`. With N sessions, N clips stream at
once. Measured per clip, from the speech as spoken (Silero's first and last speech window of
the recording, on the appends' schedule):

- **first text / first audio**: the first `session.output_transcript.delta` /
  `session.output_audio.delta` received, after the speech began;
- **end lag**: the last output transcript delta received, after the speech ended;
- **BLEU** of the output transcripts against the FLORES references (sacrebleu; `zh` tokenised
  as Chinese), next to the same server's offline text MT of the gold transcripts (MT protocol
  v1 on `/v1/mt`, one final update per sentence) in the same run: the ratio is what speech and
  simultaneity cost.

Progress goes to stderr, markdown tables to stdout. On a shared 2-core machine the lags are
indicative only; compare figures of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu
import soxr
from openai import AsyncOpenAI
from websockets.asyncio.client import connect

from bench import server as dragoman_server
from bench.agent_latency import header, log, percentile, speech_bounds, table
from bench.audio import EVAL, RATE, EvalRow, load
from bench.results import record
from dragoman.audio.pcm import float_to_pcm16
from dragoman.audio.vad import SileroModel
from dragoman.config import load_settings
from dragoman.weights import resolve

WIRE_RATE = 24_000
FRAME_S = 0.2
TAIL_S = 2.0
REFERENCE = {"de": "deu", "it": "ita", "zh": "zho_Hans"}


@dataclass(frozen=True)
class Clip:
    name: str
    source: str
    references: dict[str, str]
    audio: np.ndarray
    onset_s: float
    end_s: float


@dataclass
class Run:
    clip: Clip
    language: str
    text: str = ""
    first_text_s: float = float("nan")
    first_audio_s: float = float("nan")
    end_lag_s: float = float("nan")
    audio_s: float = 0.0
    errors: list[dict[str, Any]] = field(default_factory=list)


def clips(count: int, vad: SileroModel) -> list[Clip]:
    with (EVAL / "speech_translation.tsv").open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle, delimiter="\t") if r["src_lang"] == "en"][:count]
    out = []
    for row in rows:
        audio = load(EvalRow(row["file"], "en", None, row["src_text"], duration=0.0, notes=""))
        onset, end = speech_bounds(vad, audio)
        wire = np.ascontiguousarray(soxr.resample(audio, RATE, WIRE_RATE), dtype=np.float32)
        refs = {lang: row[column] for lang, column in REFERENCE.items()}
        out.append(Clip(Path(row["file"]).stem, row["src_text"], refs, wire, onset, end))
    return out


async def interpret(client: AsyncOpenAI, clip: Clip, language: str) -> Run:
    run = Run(clip, language)
    audio = np.concatenate([clip.audio, np.zeros(int(TAIL_S * WIRE_RATE), dtype=np.float32)])
    step = int(FRAME_S * WIRE_RATE)
    async with client.realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await conn.session.update(session={"audio": {"output": {"language": language}}})
        began = time.perf_counter()
        onset, end = began + clip.onset_s, began + clip.end_s

        async def read() -> None:
            while True:
                event = json.loads(await conn.recv_bytes())
                now = time.perf_counter()
                kind = event["type"]
                if kind == "session.output_transcript.delta":
                    run.text += event["delta"]
                    if run.first_text_s != run.first_text_s:
                        run.first_text_s = now - onset
                    run.end_lag_s = now - end
                elif kind == "session.output_audio.delta":
                    run.audio_s += len(base64.b64decode(event["delta"])) / 2 / WIRE_RATE
                    if run.first_audio_s != run.first_audio_s:
                        run.first_audio_s = now - onset
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


async def offline(ws_url: str, sources: Sequence[str], language: str) -> list[str]:
    """The same server's text MT of the gold transcripts: one final update per sentence."""
    out = []
    async with connect(ws_url + "/v1/mt", max_size=None) as ws:
        await ws.send(
            json.dumps({"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": language})
        )
        json.loads(await ws.recv())
        for seq, source in enumerate(sources, start=1):
            words = [[w, None, None] for w in source.split()]
            update = {"type": "update", "seq": seq, "utterance_id": seq, "words": words, "clock_ms": 0.0}
            await ws.send(json.dumps(update | {"is_final": True}))
            while True:
                answer = json.loads(await ws.recv())
                if answer.get("final") and answer.get("seq") == seq:
                    out.append(answer["committed_text"])
                    break
    return out


def save(
    language: str, sessions: int, count: int, score: float, baseline: float, ms: list[list[float]]
) -> None:
    """The goals of issue 25 (`bench/results.py`): BLEU ratio >= 0.8, end lag mean <= 2.5 s, first
    text p50 <= 3.5 s (with 2 sessions too)."""
    goal = f"interpreter en→{language}, {sessions} session{'s' if sessions > 1 else ''}"
    conditions = f"{count} English clips at real time; text MT BLEU {baseline:.1f}, speech BLEU {score:.1f}"
    ratio = round(score / baseline, 2) if baseline else float("nan")
    end_lag, first_text = round(float(np.nanmean(ms[2]))), round(percentile(ms[0], 50))
    record(
        "interpreter",
        goal,
        "BLEU speech / text MT",
        ratio,
        "×",
        target="≥ 0.8×",
        met=ratio >= 0.8,
        conditions=conditions,
    )
    record(
        "interpreter",
        goal,
        "end lag, mean",
        end_lag,
        "ms",
        target="≤ 2500 ms",
        met=end_lag <= 2500,
        conditions=conditions,
    )
    record(
        "interpreter",
        goal,
        "first text, p50",
        first_text,
        "ms",
        target="≤ 3500 ms",
        met=first_text <= 3500,
        conditions=conditions,
    )
    record("interpreter", goal, "first audio, p50", round(percentile(ms[1], 50)), "ms", conditions=conditions)


def bleu(hypotheses: Sequence[str], references: Sequence[str], language: str) -> float:
    tokenize = "zh" if language == "zh" else "13a"
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score)


async def measure(
    url: str, ws_url: str, items: Sequence[Clip], languages: Sequence[str], sessions: Sequence[int]
) -> None:
    client = AsyncOpenAI(
        base_url=url + "/v1", websocket_base_url=ws_url + "/v1", api_key="bench", max_retries=0
    )
    rows = []
    for language in languages:
        refs = [c.references[language] for c in items]
        text_mt = await offline(ws_url, [c.source for c in items], language)
        baseline = bleu(text_mt, refs, language)
        log(f"{language}: offline text MT BLEU {baseline:.1f}")
        for n in sessions:
            runs: list[Run] = []
            for group in range(0, len(items), n):
                batch = items[group : group + n]
                runs += await asyncio.gather(*(interpret(client, c, language) for c in batch))
                for run in runs[-len(batch) :]:
                    log(f"{language} x{n} {run.clip.name}: {run.text!r} end lag {run.end_lag_s:.2f} s")
            score = bleu([r.text for r in runs], refs, language)
            ms = [
                [1000 * getattr(r, name) for r in runs]
                for name in ("first_text_s", "first_audio_s", "end_lag_s")
            ]
            save(language, n, len(runs), score, baseline, ms)
            rows.append(
                (
                    f"en-{language}",
                    n,
                    len(runs),
                    f"{score:.1f}",
                    f"{baseline:.1f}",
                    f"{score / baseline:.2f}" if baseline else "–",
                    percentile(ms[0], 50),
                    percentile(ms[1], 50),
                    float(np.nanmean(ms[2])) if runs else float("nan"),
                    percentile(ms[2], 95),
                    sum(len(r.errors) for r in runs),
                )
            )
    print(
        table(
            (
                "direction",
                "sessions",
                "clips",
                "BLEU",
                "text MT BLEU",
                "ratio",
                "first text p50 ms",
                "first audio p50 ms",
                "end lag mean ms",
                "end lag p95 ms",
                "errors",
            ),
            rows,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--languages", nargs="+", default=["de"], choices=sorted(REFERENCE))
    parser.add_argument("--sessions", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--clips", type=int, default=12)
    parser.add_argument("--url", help="a running dragoman server (http://host:port)")
    args = parser.parse_args(argv)
    settings = load_settings()
    vad = SileroModel.load(resolve("silero-vad", settings.cache_dir))
    items = clips(args.clips, vad)
    header("The interpreter: English clips at real-time pace through the openai SDK")
    if args.url:
        url = args.url.rstrip("/")
        asyncio.run(measure(url, "ws" + url[4:], items, args.languages, args.sessions))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        serve = ["serve", "--cache-dir", str(settings.cache_dir), "--services", "interpreter", "mt"]
        with dragoman_server.running(serve, Path(tmp) / "dragoman.log") as server:
            asyncio.run(measure(server.http, server.ws, items, args.languages, args.sessions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
