"""The `dragoman` command line: serve, models, mt-server, mt calibrate."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from dragoman import __version__
from dragoman.config import SERVICES, ChineseScript, Settings, load_settings
from dragoman.errors import DragomanError
from dragoman.logs import LEVELS, configure, get_logger


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        settings = load_settings(args.config, **_overrides(args))
    except ValidationError as exc:
        print(f"dragoman: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    configure(settings.log_level, settings.log_format)
    try:
        result: int = args.run(args, settings)
        return result
    except DragomanError as exc:
        get_logger("dragoman.cli").error("command failed", error=exc.message, code=exc.code)
        print(f"dragoman: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dragoman", description="A self-hosted realtime speech server.")
    parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    commands = parser.add_subparsers(title="commands")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, help="TOML settings file (flags > environment > file)")
    common.add_argument("--cache-dir", dest="cache_dir", help="where assembled models live")
    common.add_argument(
        "--log-level",
        dest="log_level",
        choices=list(LEVELS),
        help="trace: debug with the libraries' per-frame records too",
    )
    common.add_argument("--log-format", dest="log_format", choices=["auto", "json", "console"])

    serve = commands.add_parser("serve", parents=[common], help="run the server")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--services", nargs="+", choices=list(SERVICES), help="services to load (default: all)"
    )
    serve.add_argument("--asr-backend", dest="asr.backend", help="ASR backend name (default whisper-ct2)")
    serve.add_argument(
        "--asr-model", dest="asr.model", help="packaged model name or a path to your own weights folder"
    )
    serve.add_argument(
        "--asr-route",
        dest="asr.routes",
        action="append",
        metavar="LANG=BACKEND[:MODEL]",
        help="transcribe one language with another backend, e.g. en=moonshine (repeatable)",
    )
    serve.add_argument("--asr-compute-type", dest="asr.compute_type", help="CTranslate2 compute type (int8)")
    serve.add_argument("--asr-max-batch", dest="asr.max_batch", type=int, help="most steps per engine call")
    serve.add_argument(
        "--asr-chinese-script",
        dest="asr.chinese_script",
        choices=list(get_args(ChineseScript)),
        help="the script Chinese transcripts are written in: simplified (default), traditional or heard",
    )
    serve.add_argument(
        "--asr-parallel-calls",
        dest="asr.parallel_calls",
        type=int,
        help="ASR engine calls that run at once (default: one per core on a CPU)",
    )
    serve.add_argument(
        "--asr-base-url",
        dest="asr.base_url",
        help="transcribe with a remote server's POST /v1/audio/transcriptions (its /v1 URL: another "
        "dragoman, vLLM serving Whisper, speaches, OpenAI) instead of the local engine",
    )
    serve.add_argument("--asr-remote-model", dest="asr.remote_model", help="the remote model (whisper-1)")
    serve.add_argument(
        "--asr-max-concurrent",
        dest="asr.max_concurrent",
        type=int,
        help="remote ASR requests in flight at once (8)",
    )
    serve.add_argument("--chunk-seconds", dest="transcription.chunk_seconds", type=float)
    serve.add_argument("--max-item-seconds", dest="transcription.max_item_seconds", type=float)
    serve.add_argument(
        "--max-window-seconds",
        dest="transcription.max_window_seconds",
        type=float,
        help="longest audio a streaming step re-decodes (10; 0: the whole item)",
    )
    serve.add_argument(
        "--max-transcription-sessions", dest="transcription.max_sessions", type=int, help="default 16"
    )
    serve.add_argument(
        "--max-file-bytes", dest="transcription.files.max_bytes", type=int, help="largest upload (25 MiB)"
    )
    _mt_flags(serve)
    _agent_flags(serve)
    serve.add_argument(
        "--interpreter-voice",
        dest="interpreter.voices",
        action="append",
        metavar="LANG=VOICE",
        help="the interpreter's voice of a target language (repeatable; replaces the default de=espeak-de), "
        "e.g. de=kokoro-de-nicola",
    )
    _access_flags(serve)
    serve.set_defaults(run=_serve)

    mt_server = commands.add_parser(
        "mt-server", parents=[common], help="serve MT protocol v1 alone, at / (alignatt-mt-server drop-in)"
    )
    mt_server.add_argument("--host")
    mt_server.add_argument("--port", type=int)
    _mt_flags(mt_server)
    _access_flags(mt_server)
    mt_server.set_defaults(run=_mt_server)

    models = commands.add_parser("models", parents=[common], help="list, install or verify packaged models")
    models.add_argument("action", nargs="?", choices=["list", "install", "verify"], default="list")
    models.add_argument("names", nargs="*", help="models to act on (default: all)")
    models.set_defaults(run=_models)

    mt = commands.add_parser("mt", help="machine-translation tools")
    mt_commands = mt.add_subparsers(title="mt commands")
    calibrate = mt_commands.add_parser(
        "calibrate", parents=[common], help="select the alignment heads of a model for a direction"
    )
    calibrate.add_argument("--direction", required=True, help="e.g. en-de")
    calibrate.add_argument("--model", help="packaged model name or a local path (default: the default model)")
    calibrate.add_argument(
        "--data",
        type=Path,
        nargs="+",
        help="parallel text TSV files (default: the eval set's newstest and Tatoeba excerpts, "
        "found through DRAGOMAN_EVAL_DIR or beside a source checkout)",
    )
    calibrate.add_argument("--sentences", type=int, default=48)
    calibrate.add_argument("--top-k", dest="top_k", type=int, default=8)
    calibrate.add_argument(
        "--out", type=Path, help="heads file to write (default: next to the packaged ones)"
    )
    calibrate.set_defaults(run=_calibrate)
    for sub in (serve, mt_server, models, calibrate):
        for action in sub._actions:
            # Nested settings use dotted dests ("mt.preset"); show "PRESET", not "MT.PRESET".
            if "." in action.dest and action.metavar is None and action.option_strings:
                action.metavar = action.dest.rsplit(".", 1)[-1].upper()
    return parser


def _access_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-key",
        dest="api_keys",
        action="append",
        metavar="KEY",
        help="require `Authorization: Bearer KEY` on every endpoint but /health (repeatable)",
    )
    parser.add_argument("--api-keys-file", dest="api_keys_file", type=Path, help="one key per line")
    parser.add_argument("--max-connections", dest="max_connections", type=int, help="WebSockets at once (64)")
    parser.add_argument(
        "--max-message-bytes", dest="max_message_bytes", type=int, help="largest WebSocket message (2 MiB)"
    )
    parser.add_argument(
        "--idle-timeout", dest="idle_timeout_s", type=float, help="close a silent session after (300 s)"
    )
    parser.add_argument(
        "--audio-burst",
        dest="audio_burst_s",
        type=float,
        help="audio a client may send ahead of real time, while others are live, before its "
        "appends are refused (10 s; 0: never refused)",
    )
    parser.add_argument(
        "--engine-timeout",
        dest="engine_timeout_s",
        type=float,
        help="give up a hung engine call after (120 s)",
    )
    parser.add_argument(
        "--client-secret-key",
        dest="client_secret_key",
        metavar="KEY",
        help="sign ephemeral ek_ keys with KEY (32+ bytes; also DRAGOMAN_CLIENT_SECRET_KEY), so every "
        "replica that shares it accepts them (default: a random key per process)",
    )
    parser.add_argument(
        "--redis-url",
        dest="redis_url",
        help="Redis shared by the replicas (redis://host:6379/0): an ek_ key opens one session across "
        "all of them (default: one per replica)",
    )
    parser.add_argument(
        "--drain-seconds",
        dest="drain_seconds",
        type=float,
        help="on SIGTERM, let open sessions run this long while new ones are refused, then close "
        "them with 1001 (25 s)",
    )
    parser.add_argument(
        "--replica-id",
        dest="replica_id",
        metavar="NAME",
        help="this replica's name behind a load balancer (letters, digits, -; also "
        "DRAGOMAN_REPLICA_ID): WebRTC call ids carry it, rtc_NAME_..., for the balancer to route on",
    )


def _agent_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--num-pipelines",
        dest="agent.num_pipelines",
        type=int,
        help="concurrent voice-agent sessions (default 1); they share one copy of each engine",
    )
    parser.add_argument(
        "--llm-backend", dest="llm.backend", help="llama-cpp (default), chat-completions or responses"
    )
    parser.add_argument(
        "--llm-model",
        dest="llm.model",
        help="auto (default: the 1.5B where this CPU answers fast enough with it, else the 0.5B), "
        "a packaged model name, a GGUF path, or a remote model",
    )
    parser.add_argument("--llm-base-url", dest="llm.base_url", help="an OpenAI-compatible server's /v1 URL")
    parser.add_argument("--voice", dest="tts.voice", help="the default voice (docs/voices.md lists them)")
    parser.add_argument(
        "--tts-base-url",
        dest="tts.base_url",
        help="speak with a remote server's POST /v1/audio/speech (its /v1 URL: another dragoman, "
        "OpenAI, Kokoro-FastAPI) instead of the local voices",
    )
    parser.add_argument(
        "--enable-llm-proxy",
        dest="agent.enable_llm_proxy",
        action="store_const",
        const=True,
        help="expose a remote LLM backend at /v1/chat/completions or /v1/responses "
        "(behind the server's API keys, like every route; not rate-limited)",
    )


def _mt_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        dest="mt.preset",
        help="MT preset (default auto: low_latency with the 1.5B where fast enough, else fast)",
    )
    parser.add_argument("--max-sessions", dest="mt.max_sessions", type=int)
    parser.add_argument("--max-utterance-words", dest="mt.max_utterance_words", type=int)
    parser.add_argument(
        "--max-queued-finals", dest="mt.max_queued_finals", type=int, help="finals waiting per session (16)"
    )
    parser.add_argument(
        "--mt-backend", dest="mt.backend", help="qwen-llama (default), qwen-torch or ct2-seq2seq"
    )
    parser.add_argument(
        "--mt-model", dest="mt.model", help="packaged model name or a path to your own weights"
    )
    parser.add_argument(
        "--mt-base-url",
        dest="mt.base_url",
        help="translate with a remote chat-completions server (its /v1 URL: vLLM, llama.cpp's "
        "server, OpenAI) by re-translation and LocalAgreement instead of the local AlignAtt engine",
    )
    parser.add_argument("--mt-remote-model", dest="mt.remote_model", help="the remote model to ask for")
    parser.add_argument(
        "--mt-node",
        dest="mt.nodes",
        action="append",
        metavar="URL",
        help="a `dragoman mt-server` node (ws://host:port/) that runs MT and AlignAtt for this server "
        "over MT protocol v1; repeat or comma-separate for several",
    )
    parser.add_argument(
        "--mt-node-balance",
        dest="mt.node_balance",
        choices=("round-robin", "least-loaded"),
        help="how each MT session picks its node (least-loaded)",
    )
    parser.add_argument(
        "--mt-directions", dest="mt.directions", nargs="+", help="directions a seq2seq model serves (en-de …)"
    )
    parser.add_argument(
        "--mt-compute-type",
        dest="mt.compute_type",
        help="auto (default: int8 where the CPU has VNNI or AMX and measures it faster, else float32), "
        "int8, bfloat16 or float32; for ct2-seq2seq any CTranslate2 compute type",
    )
    parser.add_argument(
        "--mt-stale-budget",
        dest="mt.stale_budget",
        type=int,
        help="qwen-llama: source tokens a partial draft may insert before the kept header and target "
        "prefix before they are recomputed (0: recompute them every update)",
    )


_NOT_SETTINGS = {
    "config",
    "run",
    "action",
    "names",
    "direction",
    "model",
    "data",
    "sentences",
    "top_k",
    "out",
}


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {key: value for key, value in vars(args).items() if key not in _NOT_SETTINGS and value is not None}


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.transports.app import create_app
    from dragoman.transports.serve import run

    return run(create_app(settings), settings)


def _mt_server(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.transports.mt_app import create_mt_app
    from dragoman.transports.serve import run

    return run(create_mt_app(settings), settings)


def _models(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.tools.models import run_cli

    return run_cli(args, settings)


def _calibrate(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.tools.calibrate import run_cli

    return run_cli(args, settings)
