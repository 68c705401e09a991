"""Remote ASR against local ASR, WER and lag: `python -m bench.asr_remote`.

    --sessions 1,4,8      concurrent transcription sessions (each run twice: local, remote)
    --seconds 20          speech per session

Two real servers on loopback: an ASR node (`dragoman serve --services transcription`, its own
Whisper) and a front-end that transcribes through the node (`--asr-base-url`,
engines/asr/openai_transcriptions.py: each re-decode step one `POST /v1/audio/transcriptions`,
the stable prefix kept on the front-end's side). The same sessions of real speech
(../shared/eval, via bench.audio) are streamed in real time to the node directly (local) and
to the front-end (remote), in turn, so both see the same machine: partial lag p95 (how far a
partial's audio is behind the audio sent), final lag p95 (commit to completed), and WER.
The Whisper steps run on the node either way; the remote path adds the front-end's HTTP hop
and the client-side prefix. Progress to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from bench.asr_load import LoadResult, StreamSettings, run_load
from bench.audio import session_inputs, wer_clips
from bench.report import percentile
from bench.results import record, this_cpu
from bench.server import running
from dragoman.config import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,4,8")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.sessions.split(",")]
    cache = str(load_settings().cache_dir)
    clips = wer_clips(30.0)
    folder = Path(tempfile.mkdtemp(prefix="asr-remote-"))
    node_args = ["serve", "--cache-dir", cache, "--services", "transcription"]
    results: dict[tuple[str, int], LoadResult] = {}
    with running(node_args, folder / "node.log") as node:
        front_args = [*node_args, "--asr-base-url", node.http + "/v1"]
        with running(front_args, folder / "front.log") as front:
            for count in counts:
                inputs = session_inputs(clips, count, args.seconds)
                for name, server in (("local", node), ("remote", front)):
                    result = asyncio.run(run_load(server.ws, inputs, StreamSettings()))
                    results[name, count] = result
                    print(
                        f"[{name} x{count}] lag p95 {percentile(result.lags(), 95):.2f} s, "
                        f"WER {result.wer():.3f}, completed {result.completed}/{count}, "
                        f"errors {len(result.errors)}",
                        file=sys.stderr,
                    )
    print(
        f"CPU: {this_cpu()}; load average {os.getloadavg()[0]:.1f}; {args.seconds:g} s of speech a session\n"
    )
    print("| sessions | path | partial lag p95 | final lag p95 | WER | completed | errors |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for (name, count), result in results.items():
        print(
            f"| {count} | {name} | {percentile(result.lags(), 95):.2f} s | "
            f"{percentile(result.final_lags(), 95):.2f} s | {result.wer():.3f} | "
            f"{result.completed}/{count} | {len(result.errors)} |"
        )
    for count in counts:
        local, remote = results["local", count], results["remote", count]
        conditions = f"{count} sessions, {args.seconds:g} s of speech each, node and front-end on one machine"
        # WER counts whole recordings only: a single session may get a window of a long one.
        if local.wer() > 0 and remote.wer() == remote.wer():
            ratio = remote.wer() / local.wer()
            print(f"\n{count} sessions: WER remote / local {ratio:.2f}x")
            wer_metric = f"WER remote / local, {count} sessions"
            record("asr_remote", "remote ASR", wer_metric, ratio, "x", conditions=conditions)
        lag = percentile(remote.lags(), 95)
        record(
            "asr_remote",
            "remote ASR",
            f"partial lag p95 remote, {count} sessions",
            lag,
            "s",
            conditions=conditions,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
