"""Remote TTS against local TTS, time to the first audio: `python -m bench.tts_remote`.

    --sentences 20        FLORES-200 devtest English sentences (../shared/eval), up to 200 characters
    --voice hibari        the catalog voice both sides speak with

Two real servers on loopback: a TTS node (`dragoman serve --services agent`, its own voices)
and a front-end that speaks through the node (`--tts-base-url`, engines/tts/openai_speech.py).
Each sentence is asked of both, in turn (local first, then remote, so both see the same load),
through `POST /v1/audio/speech` with `response_format: "pcm"`, streamed: the time to the first
audio byte and to the last. The remote path adds the front-end's HTTP call to the node and a
second pass through a TTS worker; the voices themselves run once, on the node, either way.
Progress to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.results import record, this_cpu
from bench.server import running
from bench.tts_roundtrip import flores_sentences
from dragoman.config import load_settings


def timed(client: httpx.Client, url: str, text: str, voice: str) -> tuple[float, float, int]:
    """(seconds to the first audio byte, to the last, bytes) of one streamed speech request."""
    body = {"model": "tts-1", "input": text, "voice": voice, "response_format": "pcm"}
    began = time.perf_counter()
    first = 0.0
    size = 0
    with client.stream("POST", url + "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if chunk and not first:
                first = time.perf_counter() - began
            size += len(chunk)
    return first, time.perf_counter() - began, size


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--voice", default="hibari")
    args = parser.parse_args(argv)
    cache = str(load_settings().cache_dir)
    sentences = flores_sentences("en", args.sentences, 200)
    folder = Path(tempfile.mkdtemp(prefix="tts-remote-"))
    with running(["serve", "--cache-dir", cache, "--services", "agent"], folder / "node.log") as node:
        front_args = [
            "serve",
            "--cache-dir",
            cache,
            "--services",
            "agent",
            "--tts-base-url",
            node.http + "/v1",
        ]
        with running(front_args, folder / "front.log") as front, httpx.Client(timeout=120) as client:
            timed(client, node.http, "Warm up.", args.voice)
            timed(client, front.http, "Warm up.", args.voice)
            local: list[tuple[float, float, int]] = []
            remote: list[tuple[float, float, int]] = []
            for i, text in enumerate(sentences, 1):
                local.append(timed(client, node.http, text, args.voice))
                remote.append(timed(client, front.http, text, args.voice))
                print(
                    f"[{i}/{len(sentences)}] local {local[-1][0] * 1000:.0f} ms, remote {remote[-1][0] * 1000:.0f} ms",
                    file=sys.stderr,
                )
    print(
        f"CPU: {this_cpu()}; load average {os.getloadavg()[0]:.1f}; voice {args.voice}; {len(sentences)} sentences\n"
    )
    print("| path | first audio p50 | first audio p95 | whole sentence p50 | audio p50 |")
    print("|---|---:|---:|---:|---:|")
    rows = {"local": local, "remote": remote}
    for name, timings in rows.items():
        firsts = [t[0] * 1000 for t in timings]
        wholes = [t[1] * 1000 for t in timings]
        seconds = statistics.median(t[2] / 2 / 24_000 for t in timings)
        print(
            f"| {name} | {statistics.median(firsts):.0f} ms | {p95(firsts):.0f} ms | "
            f"{statistics.median(wholes):.0f} ms | {seconds:.2f} s |"
        )
    ratio = statistics.median(t[0] for t in remote) / statistics.median(t[0] for t in local)
    print(f"\nremote / local first audio p50: {ratio:.2f}x")
    conditions = (
        f"{len(sentences)} FLORES en sentences, voice {args.voice}, node and front-end on one machine"
    )
    record("tts_remote", "remote TTS", "first audio p50, remote / local", ratio, "x", conditions=conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
