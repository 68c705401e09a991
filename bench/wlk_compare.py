"""dragoman against WhisperLiveKit, concurrent streaming sessions in one run: `python -m bench.wlk_compare`.

    make whisperlivekit                                    # once: WLK 0.2.26 in its own virtualenv
    .venv/bin/python -m bench.wlk_compare                  # 1, 2, 4, 8 sessions on each server
    .venv/bin/python -m bench.wlk_compare --sessions 1 --clips 1     # smoke run, about a minute
    .venv/bin/python -m bench.wlk_compare --wlk-beam 1     # WLK decoding greedily, as dragoman does
    .venv/bin/python -m bench.wlk_compare --servers wlk    # one server only
    .venv/bin/python -m bench.wlk_compare --windows 3      # add 20 s windows of the longer recordings

Issue 12 ("Transcription at scale") asks for dragoman's streaming transcription measured against
the one-session figures and against WhisperLiveKit, which a user would pick instead. Both servers
run the same CTranslate2 Whisper folder (`--model`, whisper-base by default), int8 on the CPU, one
after the other (never at the same time), and get the same real recordings (bench/audio.py) at
real-time pace in 100 ms pieces, session starts spread over 2 s as in bench/asr_streaming.py.
By default the items are the whole English recordings of 8-20 s (each has a reference, so every
row has a WER; the pool repeats past its size); `--windows` adds 20 s windows of the longer ones.

- dragoman: a real `dragoman serve --services transcription` with the settings of
  bench/asr_streaming_server.py's concurrency table (its clients are bench/asr_load.py's).
- WhisperLiveKit 0.2.26 (`make whisperlivekit`: ~/.cache/dragoman-tools/whisperlivekit-0.2.26,
  or the interpreter in $DRAGOMAN_WLK_PYTHON / `--wlk-python`): its server (`whisperlivekit.
  basic_server`) on 127.0.0.1 with the faster-whisper backend and the LocalAgreement policy
  (WLK's default policy, SimulStreaming, needs PyTorch Whisper weights), `--model_dir` set to the
  same folder, raw s16le input (`--pcm-input`; there is no ffmpeg), language en, and its other
  defaults: VAC on (the Silero ONNX that ships inside the wheel), `--min-chunk-size` 0.1,
  buffer trimming at segments past 15 s. WLK hard-codes `device="auto", compute_type="auto"`
  (int8_float32 on this CPU) and `beam_size=5`; a few lines run before its server (`LAUNCHER`)
  load the model on the CPU in int8 with dragoman's ASR thread count and make the beam
  `--wlk-beam`. Nothing is downloaded: HF_HUB_OFFLINE is set and the warm-up file is a local
  recording. Its websocket `/asr` takes raw audio bytes and an empty message to end the stream,
  and answers JSON: the whole transcript each time (`lines`, committed, and
  `buffer_transcription`, the unconfirmed tail), then `{"type": "ready_to_stop"}`.

Measures, per server and number of sessions. Partial lag: arrival of a partial − when the audio
it covers had been sent. dragoman reports that audio in `audio_seconds`; WLK reports
`remaining_time_transcription_processing` (audio received but not yet transcribed, 0.1 s
steps), so its partial covers the audio sent by its arrival less that. A WLK partial is a
message whose text changed; the last change after the end of the stream is the final one, not a
partial. Final latency: the completed event (dragoman) or `ready_to_stop` (WLK) − the commit or
end-of-stream. WER of the final transcripts of whole recordings (dragoman.tools.wer).

How the two differ, which the figures carry: dragoman steps every 2 s of audio (chunk_seconds),
re-decodes at most the last 10 s, encodes only the audio a step has, decodes greedily and batches
the steps of concurrent sessions. WLK runs its next decode as soon as the previous one returns,
on the whole buffer (silences under 5 s are kept as zeros; trimmed at a segment end once past
15 s), faster-whisper pads every call to Whisper's 30 s window, beam 5, and the sessions' calls
queue for the one CTranslate2 replica (no batching). Measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from bench import server as dragoman_server
from bench.asr_load import (
    COMPLETED,
    PARTIAL,
    PIECE_SECONDS,
    LoadResult,
    StreamSettings,
    Trace,
    drive,
    run_load,
)
from bench.asr_streaming_server import pct, serve_args
from bench.audio import EVAL, RATE, Audio, Clip, SessionInput, session_inputs, wer_clips
from bench.report import log, percentile, table
from dragoman.audio.pcm import float_to_pcm16
from dragoman.config import default_cache_dir
from dragoman.cpu import available_cores, cpu_info
from dragoman.weights import resolve
from harness.server import Server, stop

WLK_VERSION = "0.2.26"
WLK_PYTHON = Path.home() / ".cache" / "dragoman-tools" / f"whisperlivekit-{WLK_VERSION}" / "bin" / "python"
#: Items longer than this are windows of a longer recording (bench/asr_streaming_plan.py's figure).
SESSION_SECONDS = 20.0
#: Run in WLK's interpreter before its server: argv[1] threads, argv[2] beam, then WLK's own
#: options. WLK's FasterWhisperASR loads with device/compute "auto" and decodes with beam 5.
LAUNCHER = """
import sys
from faster_whisper import WhisperModel
from whisperlivekit.local_agreement import backends
THREADS, BEAM = int(sys.argv.pop(1)), int(sys.argv.pop(1))
def load_model(self, model_size=None, cache_dir=None, model_dir=None):
    return WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=THREADS)
def transcribe(self, audio, init_prompt=""):
    segments, _ = self.model.transcribe(
        audio, language=self.original_language, initial_prompt=init_prompt, beam_size=BEAM,
        word_timestamps=True, condition_on_previous_text=True, **self.transcribe_kargs)
    return list(segments)
backends.FasterWhisperASR.load_model = load_model
backends.FasterWhisperASR.transcribe = transcribe
from whisperlivekit.basic_server import main
main()
"""


@dataclass(frozen=True)
class WLKConfig:
    python: Path
    model_dir: Path
    threads: int
    beam: int
    warmup_file: Path

    def args(self, port: int) -> list[str]:
        return [
            "--host", "127.0.0.1", "--port", str(port),
            "--backend", "faster-whisper", "--backend-policy", "localagreement",
            "--model_dir", str(self.model_dir), "--lan", "en", "--pcm-input",
            "--warmup-file", str(self.warmup_file), "--log-level", "INFO",
        ]  # fmt: skip

    def describe(self) -> str:
        return (
            f"WhisperLiveKit {WLK_VERSION}: faster-whisper backend, LocalAgreement policy, int8 on CPU, "
            f"{self.threads} threads, beam {self.beam}, VAC on, min chunk 0.1 s, segment trimming at 15 s"
        )


@contextmanager
def wlk_running(config: WLKConfig, log_path: Path, timeout: float = 300.0) -> Iterator[Server]:
    """WLK's server on a free 127.0.0.1 port, until /health says it is ready."""
    if not config.python.exists():
        raise SystemExit(f"{config.python} is missing: run `make whisperlivekit` first")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log_path.open("wb") as handle:
        process = subprocess.Popen(
            [str(config.python), "-c", LAUNCHER, str(config.threads), str(config.beam), *config.args(port)],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    server = Server(port, process, log_path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"WhisperLiveKit exited with {process.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"WhisperLiveKit not ready in {timeout:g} s:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(server.http + "/health", timeout=2) as response:
                    if json.loads(response.read()).get("ready"):
                        break
            except OSError:
                pass
            time.sleep(0.3)
        yield server
    finally:
        stop(server)


def wlk_text(message: dict[str, Any]) -> str:
    """The transcript a WLK message shows: its committed lines, then the unconfirmed tail."""
    parts = [str(line.get("text", "")).strip() for line in message.get("lines", [])]
    parts.append(str(message.get("buffer_transcription", "")).strip())
    return " ".join(p for p in parts if p)


def wlk_events(
    changes: list[tuple[float, str, float]], ended: float, seconds: float, ready: float
) -> list[tuple[float, dict[str, Any]]]:
    """A WLK session's text changes as bench/asr_load.py's partial and completed events.

    `changes`: (arrival, text, audio covered) of each message whose text changed; `ended`: when
    the end of the stream was sent; `ready`: when `ready_to_stop` arrived. The last change, when
    it came after the end of the stream, is the final transcript rather than a partial.
    """
    partials = changes[:-1] if changes and changes[-1][0] >= ended else changes
    events: list[tuple[float, dict[str, Any]]] = [
        (arrival, {"type": PARTIAL, "audio_seconds": covered, "text": text})
        for arrival, text, covered in partials
    ]
    final = changes[-1][1] if changes else ""
    events.append((ready, {"type": COMPLETED, "transcript": final, "usage": {"seconds": seconds}}))
    return events


async def _wlk_session(
    ws: ClientConnection, audio: Audio, trace: Trace, start_at: float, errors: list[dict[str, Any]]
) -> None:
    """Stream `audio` as bench/asr_load.py does; record WLK's answers as partial/completed events."""
    step = int(PIECE_SECONDS * RATE)
    pcm = float_to_pcm16(audio)
    # (arrival, text, audio the text covers) of each message whose text changed.
    changes: list[tuple[float, str, float]] = []

    async def read() -> None:
        last = ""
        async for message in ws:
            now = time.monotonic()
            event: dict[str, Any] = json.loads(message)
            if event.get("type") == "ready_to_stop":
                trace.received += wlk_events(changes, trace.committed, len(audio) / RATE, now)
                return
            if event.get("status") == "error" or event.get("type") == "error":
                errors.append(event)
                continue
            text = wlk_text(event)
            if text == last:
                continue
            last = text
            sent = trace.sent[-1][0] / RATE if trace.sent else 0.0
            behind = float(event.get("remaining_time_transcription_processing") or 0.0)
            changes.append((now, text, max(0.0, sent - behind)))

    reader = asyncio.create_task(read())
    try:
        count = 0
        for index, offset in enumerate(range(0, len(audio), step)):
            await asyncio.sleep(max(0.0, start_at + (index + 1) * PIECE_SECONDS - time.monotonic()))
            await ws.send(pcm[2 * offset : 2 * (offset + step)])
            count = min(len(audio), count + step)
            trace.sent.append((count, time.monotonic()))
        await ws.send(b"")  # WLK's end of stream
        trace.committed = time.monotonic()
        await asyncio.wait_for(reader, timeout=600)
    finally:
        reader.cancel()
        await ws.close()


async def run_wlk_load(ws_base: str, inputs: list[SessionInput], settings: StreamSettings) -> LoadResult:
    """bench/asr_load.py's `run_load` for WLK's `/asr`: same pacing, start spread and traces."""

    async def open_one() -> ClientConnection:
        ws = await connect(ws_base + "/asr", max_size=None, ping_interval=None, open_timeout=60)
        first = json.loads(await ws.recv())
        if first.get("type") != "config":
            raise RuntimeError(f"expected WLK's config message, got {first}")
        return ws

    connections = await asyncio.gather(*(open_one() for _ in inputs))
    return await drive(connections, inputs, settings, _wlk_session)


# -- the run ------------------------------------------------------------------------------------------


def pick_clips(clips: list[Clip], count: int | None, windows: int, shortest: float = 8.0) -> list[Clip]:
    """The `count` shortest recordings that make items (all of them when None).

    Items are recordings of `shortest` s to SESSION_SECONDS, and with `windows` also the longer
    ones (bench/audio.py's `session_inputs`, which cuts windows out of those).
    """
    longest = float("inf") if windows else SESSION_SECONDS
    usable = [c for c in clips if shortest <= c.seconds <= longest]
    return usable if count is None else usable[:count]


#: Starts a server (its log at the path) for as long as the context lasts.
Starter = Callable[[Path], AbstractContextManager[Server]]
#: Streams the inputs to a server's websocket base URL as concurrent sessions.
Loader = Callable[[str, list[SessionInput], StreamSettings], Coroutine[Any, Any, LoadResult]]


def run_loads(
    name: str,
    start: Starter,
    load: Loader,
    counts: Sequence[int],
    clips: list[Clip],
    windows: int,
    workdir: Path,
) -> list[LoadResult]:
    settings = StreamSettings()
    results: list[LoadResult] = []
    began = time.perf_counter()
    with start(workdir / f"{name}.log") as srv:
        log(f"{name} up in {time.perf_counter() - began:.1f} s")
        for count in counts:
            inputs = session_inputs(clips, count, SESSION_SECONDS, windows=windows)
            try:
                result = asyncio.run(load(srv.ws, inputs, settings))
            except Exception:
                log(f"{name}, {count} sessions failed; the server's log ends:\n{srv.log_tail()}")
                raise
            log(
                f"{name}, {count} sessions: p95 lag {percentile(result.lags(), 95):.2f} s, "
                f"WER {pct(result.wer())}, {result.completed}/{count} completed, {len(result.errors)} errors"
            )
            for trace in result.traces:
                log(f"  {trace.name}: {trace.transcript!r}")
            results.append(result)
    return results


HEADERS = [
    "server",
    "sessions",
    "audio s each",
    "partials",
    "partial lag p50 / p95 s",
    "lag max s",
    "p95 lag / 1 session",
    "final p50 / p95 s",
    "WER",
    "completed",
]


def row(name: str, result: LoadResult, alone: LoadResult | None) -> list[object]:
    lags, finals = result.lags(), result.final_lags()
    seconds = sum(t.seconds for t in result.traces) / len(result.traces)
    p95 = percentile(lags, 95)
    ratio = p95 / percentile(alone.lags(), 95) if alone is not None and alone.lags() else float("nan")
    done = f"{result.completed}/{result.sessions}"
    return [
        name,
        result.sessions,
        f"{seconds:.1f}",
        len(lags),
        f"{percentile(lags, 50):.2f} / {p95:.2f}",
        f"{max(lags, default=float('nan')):.2f}",
        "–" if ratio != ratio else f"{ratio:.2f}×",
        f"{percentile(finals, 50):.2f} / {percentile(finals, 95):.2f}",
        pct(result.wer()),
        done + (f", {len(result.errors)} errors" if result.errors else ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wlk_compare", description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", default="1,2,4,8", help="comma-separated session counts")
    parser.add_argument(
        "--clips", type=int, help=f"only the N shortest recordings of 8-{SESSION_SECONDS:g} s"
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=0,
        help=f"also up to N {SESSION_SECONDS:g} s windows of each longer recording (no reference, no WER)",
    )
    parser.add_argument("--servers", default="dragoman,wlk", help="dragoman,wlk or either one")
    parser.add_argument("--model", default="whisper-base", help="packaged model name or a CTranslate2 folder")
    parser.add_argument("--wlk-beam", type=int, default=5, help="WLK's beam size (its own default: 5)")
    parser.add_argument(
        "--wlk-python",
        type=Path,
        default=Path(os.environ.get("DRAGOMAN_WLK_PYTHON", WLK_PYTHON)),
        help="the interpreter of WLK's virtualenv (`make whisperlivekit`)",
    )
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.sessions.split(",") if n.strip()]
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if unknown := set(servers) - {"dragoman", "wlk"}:
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    clips = pick_clips(wer_clips(30.0), args.clips, args.windows)
    if not clips:
        parser.error(f"no recording of 8-{SESSION_SECONDS:g} s")
    model_dir = resolve(args.model, default_cache_dir(), role="asr")
    wlk = WLKConfig(args.wlk_python, model_dir, available_cores(), args.wlk_beam, EVAL / clips[0].row.file)
    load = os.getloadavg()
    print("# Streaming transcription: dragoman against WhisperLiveKit\n")
    print(
        f"Model {args.model} ({model_dir}), int8 on CPU; {cpu_info().describe()}; load average at start "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}. Data: ../shared/eval, {len(clips)} English recordings of "
        f"{clips[0].seconds:.1f}-{clips[-1].seconds:.1f} s"
        + (f" ({args.windows} window(s) of {SESSION_SECONDS:g} s of those longer)" if args.windows else "")
        + "; sessions take them longest first, repeating them past their count.\n"
    )
    print(f"- dragoman: `dragoman {' '.join(serve_args(args.model, None))}`")
    print(f"- {wlk.describe()}\n")
    began = time.perf_counter()
    results: dict[str, list[LoadResult]] = {}
    with tempfile.TemporaryDirectory(prefix="dragoman-wlk-") as tmp:
        workdir = Path(tmp)
        for name in servers:
            if name == "dragoman":
                start: Starter = partial(dragoman_server.running, serve_args(args.model, None))
                results[name] = run_loads(name, start, run_load, counts, clips, args.windows, workdir)
            else:
                results[name] = run_loads(
                    name, partial(wlk_running, wlk), run_wlk_load, counts, clips, args.windows, workdir
                )
    print(
        "Each session streams one real recording (or a window of a longer one) at real-time pace in "
        "100 ms pieces, then ends its stream; partial lag = arrival − when the audio the partial "
        "covers had been sent; final = completed − end of stream; p95 lag / 1 session: against "
        "the same server's one-session p95 in this run. WER over the items that are whole "
        "recordings.\n"
    )
    rows: list[list[object]] = []
    for name, loads in results.items():
        alone = next((r for r in loads if r.sessions == 1), None)
        label = "dragoman" if name == "dragoman" else f"WhisperLiveKit (beam {args.wlk_beam})"
        rows += [row(label, r, alone) for r in loads]
    print(table(HEADERS, rows))
    load = os.getloadavg()
    print(f"\nFinished in {time.perf_counter() - began:.0f} s; load average at the end {load[0]:.2f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
