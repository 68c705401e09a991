"""The interpreter through a long talk: `python -m bench.interpreter_talk`.

    --languages it,de,zh   targets (default: it,de)
    --url http://...       a running server whose interpreter hears English

`bench.interpreter` sends one short clip a session, so the translated speech never has long
to fall behind. A speaker who talks on does: each clause spoken longer than its source, or made
slower than real time beside MT, adds to the wait for the next. Two talks, each through one
translation session at real-time pace (the client of `bench.interpreter`, which plays the
translated audio as it arrives):

* the earnings call of ../shared/eval (60 s of spontaneous English, few pauses);
* the five English FLEURS clips as one talk, 0.6 s of silence between them.

Per target and talk: the output audio against the speech's length, the first text and audio,
the text's end lag, and the spoken end lag (when the last translated word is heard after the
speaker stopped). No reference translates the earnings call, so no BLEU here: the translation's
quality is `bench.interpreter`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from openai import AsyncOpenAI

from bench import server as dragoman_server
from bench.audio import RATE, EvalRow, load
from bench.interpreter_clips import Clip, as_clip
from bench.interpreter_sessions import Run, interpret
from bench.report import header, log, table
from bench.results import record
from dragoman.audio.vad import SileroModel
from dragoman.config import load_settings
from dragoman.logs import configure as configure_logs
from dragoman.weights import resolve

EARNINGS = "asr/en/en_earnings22_4483589_261_321.wav"
FLEURS = [f"asr/en/en_fleurs_test_00{i}.ogg" for i in range(5)]
GAP_S = 0.6


def english(path: str) -> np.ndarray:
    return load(EvalRow(path, "en", None, "", duration=0.0, notes=""))


def talks(vad: SileroModel) -> list[Clip]:
    """The two talks, at the wire's rate, with where their speech begins and ends."""
    gap = np.zeros(int(GAP_S * RATE), dtype=np.float32)
    fleurs = np.concatenate([part for path in FLEURS for part in (english(path), gap)])
    return [
        as_clip("earnings call, 60 s", "", "", english(EARNINGS), vad),
        as_clip("5 FLEURS clips, 0.6 s gaps", "", "", fleurs, vad),
    ]


async def measure(url: str, ws_url: str, languages: Sequence[str], items: Sequence[Clip]) -> list[Run]:
    client = AsyncOpenAI(
        base_url=url + "/v1", websocket_base_url=ws_url + "/v1", api_key="bench", max_retries=0
    )
    runs = []
    for language in languages:
        for talk in items:
            run = await interpret(client, talk, language)
            log(f"→{language} {talk.name}: {run.text!r}")
            runs.append(run)
    return runs


def report(runs: Sequence[Run]) -> None:
    rows = []
    for run in runs:
        speech_s = run.clip.end_s - run.clip.onset_s
        rows.append(
            (
                f"en→{run.language}",
                run.clip.name,
                f"{speech_s:.1f} s",
                f"{run.audio_s:.1f} s ({run.audio_s / speech_s:.2f}×)",
                f"{run.first_text_s:.1f} s",
                f"{run.first_audio_s:.1f} s",
                f"{run.end_lag_s:.1f} s",
                f"{run.speech_end_lag_s:.1f} s",
                len(run.errors),
            )
        )
        goal = f"interpreter en→{run.language}, a long talk ({run.clip.name})"
        conditions = (
            f"1 session at real time; output audio {run.audio_s:.1f} s for {speech_s:.1f} s of speech"
        )
        for metric, value in (
            ("spoken end lag", run.speech_end_lag_s),
            ("end lag", run.end_lag_s),
            ("first audio", run.first_audio_s),
        ):
            record("interpreter_talk", goal, metric, round(1000 * value), "ms", conditions=conditions)
    headers = [
        "direction",
        "talk",
        "speech",
        "output audio",
        "first text",
        "first audio",
        "end lag",
        "spoken end lag",
        "errors",
    ]
    print(table(headers, rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--languages", default="it,de", help="targets, comma-separated")
    parser.add_argument("--url", help="a running dragoman server (http://host:port)")
    args = parser.parse_args(argv)
    languages = [lang.strip() for lang in args.languages.split(",") if lang.strip()]
    configure_logs(level="warning")
    settings = load_settings()
    items = talks(SileroModel.load(resolve("silero-vad", settings.cache_dir)))
    header("The interpreter through a long talk: one session at real-time pace, the openai SDK")
    if args.url:
        url = args.url.rstrip("/")
        runs = asyncio.run(measure(url, dragoman_server.websocket_url(url), languages, items))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            serve = ["serve", "--cache-dir", str(settings.cache_dir), "--services", "interpreter", "mt"]
            with dragoman_server.running(serve, Path(tmp) / "dragoman.log") as server:
                runs = asyncio.run(measure(server.http, server.ws, languages, items))
    report(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
