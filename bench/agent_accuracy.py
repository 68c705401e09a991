"""Does the voice agent answer everyday questions right? `python -m bench.agent_accuracy`.

    --models qwen2.5-0.5b-instruct-gguf,qwen2.5-1.5b-instruct-gguf   LLMs compared (one server each)
    --voices hibari,joe,espeak-en the voices that speak the questions (the project's own TTS):
                                  its two natural English voices, and espeak-ng's robotic one
    --modes typed,spoken
    --limit 40                    the first N questions only (default: all of bench/data/agent_questions.tsv)
    --json answers.json           every answer; --rescore answers.json judges them again (a fixed fact)
    --language en                 the spoken sessions' `transcription.language` (default: none)
    --asr-route en=moonshine      the server's ASR routes (`dragoman serve --asr-route`); results
                                  are goals of their own ("voice agent answers (M, ASR en=moonshine)")

A real `dragoman serve --services agent --llm-model M` on a free loopback port, one
model after the other, driven by the openai SDK's Realtime client (every event
validated against `openai.types.realtime`). The server's default instructions are
left as they are: this is what a client that sends none gets.

Each question is asked in a new session, so no answer sees another:
- **typed**: a `conversation.item.create` with the question as `input_text`, then
  `response.create`;
- **spoken**: the question synthesised by a voice of the project's own TTS, appended
  as 24 kHz PCM16 with 1.2 s of silence after it; server VAD ends the turn and starts
  the response, and the turn's transcript (whisper, `input_audio_transcription`) shows
  what the server heard.

Responses are text (`output_modalities: ["text"]`), which the LLM writes exactly as
it writes an audio response's transcript, and saves the CPU the answers' speech.
A right answer contains the question's fact (`bench/data/agent_questions.tsv`), as
whole words after the WER normalisation of dragoman.tools.wer ("4" and "four" agree).
Reported per model and mode: accuracy, how many spoken questions the server heard word
for word (after the same normalisation: what the listener, not the LLM, gets wrong), mean
words of an answer, responses that ended `incomplete`, and median time from the request (or
from the end of the appended audio) to `response.done`. Every wrong answer is listed with
what was heard.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import csv
import json
import statistics
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from bench import server as dragoman_server
from bench.audio import synthesise
from bench.report import header, log, table
from bench.results import record
from dragoman.tools.wer import normalize
from harness.realtime_helpers import Transcript, read_until
from harness.server import Server

QUESTIONS = Path(__file__).resolve().parent / "data" / "agent_questions.tsv"
MODELS = ("qwen2.5-0.5b-instruct-gguf", "qwen2.5-1.5b-instruct-gguf")
RATE = 24_000
PAUSE_S = 1.2
ANSWER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Question:
    category: str
    text: str
    #: Alternatives, any of which makes an answer right.
    facts: tuple[str, ...]

    def right(self, answer: str) -> bool:
        said = f" {normalize(answer)} "
        return any(f" {normalize(fact)} " in said for fact in self.facts)


@dataclass(frozen=True)
class Answer:
    question: Question
    mode: str
    heard: str
    text: str
    status: str
    seconds: float

    @property
    def right(self) -> bool:
        return self.question.right(self.text)

    @property
    def words(self) -> int:
        return len(self.text.split())


def questions(limit: int | None = None) -> list[Question]:
    with QUESTIONS.open(encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    rows = list(csv.DictReader(lines, delimiter="\t"))
    out = [Question(r["category"], r["question"], tuple(r["answer"].split("|"))) for r in rows]
    return out[:limit] if limit else out


def client(server: Server) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.http + "/v1", websocket_base_url=server.ws + "/v1", api_key="sk-local", max_retries=0
    )


def pool_idle(server: Server) -> bool:
    with urllib.request.urlopen(server.http + "/v1/pool", timeout=10) as response:
        return bool(json.loads(response.read())["idle"])


async def wait_pool(server: Server) -> None:
    for _ in range(600):
        if await asyncio.to_thread(pool_idle, server):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the pool stayed busy")


def answer_text(done: dict[str, Any]) -> str:
    parts = [
        part.get("text") or part.get("transcript") or ""
        for item in done["response"]["output"]
        if item.get("type") == "message"
        for part in item.get("content", [])
    ]
    return " ".join(p for p in parts if p).strip()


@contextlib.asynccontextmanager
async def configured(server: Server, session: Any) -> AsyncIterator[tuple[Any, Transcript]]:
    """A new Realtime session, past the `session.updated` of `session`, and its events."""
    async with client(server).realtime.connect(model="dragoman-agent") as conn:
        events = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.session.update(session=session)
        await read_until(conn, events, lambda e: e["type"] in ("session.updated", "error"))
        if events.errors():
            raise RuntimeError(f"session.update refused: {events.errors()}")
        yield conn, events


async def ask(
    server: Server, question: Question, mode: str, audio: bytes | None, language: str | None = None
) -> Answer:
    await wait_pool(server)
    session: Any = {"type": "realtime", "output_modalities": ["text"]}
    if audio is not None:
        transcription = {"model": "whisper-1"} | ({"language": language} if language else {})
        session["audio"] = {
            "input": {"transcription": transcription, "turn_detection": {"type": "server_vad"}}
        }
    async with configured(server, session) as (conn, events):
        if audio is None:
            item: Any = {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": question.text}],
            }
            await conn.conversation.item.create(item=item)
            began = time.perf_counter()
            await conn.response.create()
        else:
            pcm = audio + bytes(2 * int(PAUSE_S * RATE))
            step = 2 * RATE // 10
            for start in range(0, len(pcm), step):
                await conn.input_audio_buffer.append(
                    audio=base64.b64encode(pcm[start : start + step]).decode()
                )
            began = time.perf_counter()
        await read_until(conn, events, lambda e: e["type"] == "response.done", ANSWER_TIMEOUT_S)
        seconds = time.perf_counter() - began
        heard = question.text
        if audio is not None:
            transcribed = "conversation.item.input_audio_transcription.completed"
            if not events.of(transcribed):
                await read_until(conn, events, lambda e: e["type"] == transcribed, 30)
            heard = events.of(transcribed)[0]["transcript"].strip()
    done = events.of("response.done")[0]
    return Answer(question, mode, heard, answer_text(done), done["response"]["status"], seconds)


async def run_model(
    model: str,
    asked: Sequence[Question],
    modes: Sequence[str],
    spoken: dict[tuple[str, str], bytes],
    workdir: Path,
    routes: Sequence[str] = (),
    language: str | None = None,
) -> list[Answer]:
    args = ["serve", "--services", "agent", "--llm-model", model]
    args += dragoman_server.asr_route_flags(routes)
    answers: list[Answer] = []
    with dragoman_server.running(args, workdir / f"serve-{model}.log") as server:
        for mode in modes:
            voices = [None] if mode == "typed" else sorted({v for v, _ in spoken})
            for voice in voices:
                label = mode if voice is None else f"spoken ({voice})"
                for i, question in enumerate(asked, 1):
                    audio = None if voice is None else spoken[(voice, question.text)]
                    answer = await ask(server, question, label, audio, language)
                    answers.append(answer)
                    if i % 20 == 0 or i == len(asked):
                        right = sum(a.right for a in answers if a.mode == label)
                        log(f"{model} {label}: {i}/{len(asked)} asked, {right} right")
    return answers


def report(results: dict[str, list[Answer]], variant: str = "") -> None:
    """The table and the results; `variant` names a server not on its defaults (", ASR en=...")."""
    rows = []
    for model, answers in results.items():
        for mode in dict.fromkeys(a.mode for a in answers):
            of_mode = [a for a in answers if a.mode == mode]
            right = sum(a.right for a in of_mode)
            unfinished = sum(a.status != "completed" for a in of_mode)
            percent = 100 * right / len(of_mode)
            exact = sum(normalize(a.heard) == normalize(a.question.text) for a in of_mode)
            record(
                "agent_accuracy",
                f"voice agent answers ({model}{variant})",
                f"everyday questions answered right, {mode}",
                percent,
                "%",
                target="≥ 95 %, none incomplete",
                met=percent >= 95 and unfinished == 0,
                conditions=f"{len(of_mode)} questions; {unfinished} not completed; default instructions",
            )
            rows.append(
                (
                    model,
                    mode,
                    f"{100 * right / len(of_mode):.1f} % ({right}/{len(of_mode)})",
                    "" if mode == "typed" else f"{exact}/{len(of_mode)}",
                    f"{statistics.mean(a.words for a in of_mode):.1f}",
                    unfinished,
                    f"{statistics.median(a.seconds for a in of_mode):.2f}",
                )
            )
    print(
        table(
            [
                "LLM",
                "asked",
                "correct",
                "heard word for word",
                "mean words",
                "not completed",
                "median s to response.done",
            ],
            rows,
            whole=True,
        )
    )
    print("\n## Wrong or incomplete answers\n")
    for model, answers in results.items():
        for a in answers:
            if not a.right or a.status != "completed":
                heard = "" if a.heard == a.question.text else f' (heard "{a.heard}")'
                print(f'- {model}, {a.mode}: "{a.question.text}"{heard} → "{a.text}" [{a.status}]')


def rescore(path: Path) -> dict[str, list[Answer]]:
    """The answers of an earlier run's --json, judged by the current facts of the question set."""
    by_text = {q.text: q for q in questions()}
    saved = json.loads(path.read_text(encoding="utf-8"))
    return {
        model: [
            Answer(by_text[a["question"]], a["mode"], a["heard"], a["answer"], a["status"], a["seconds"])
            for a in answers
        ]
        for model, answers in saved.items()
    }


async def main_async(args: argparse.Namespace) -> None:
    if args.rescore:
        header("Voice agent answer accuracy (rescored)")
        print(f"The answers of {args.rescore}, judged by the current question set.\n")
        report(rescore(Path(args.rescore)))
        return
    asked = questions(args.limit)
    modes = args.modes.split(",")
    voices = args.voices.split(",") if "spoken" in modes else []
    spoken = synthesise([q.text for q in asked], voices, RATE) if voices else {}
    if voices:
        log(f"synthesised {len(asked)} questions with {', '.join(voices)}")
    results: dict[str, list[Answer]] = {}
    with tempfile.TemporaryDirectory(prefix="agent-accuracy-") as tmp:
        for model in args.models.split(","):
            results[model] = await run_model(
                model, asked, modes, spoken, Path(tmp), args.asr_route, args.language
            )
    if args.json:
        dump = json.dumps(
            {
                model: [
                    {
                        "mode": a.mode,
                        "question": a.question.text,
                        "heard": a.heard,
                        "answer": a.text,
                        "status": a.status,
                        "right": a.right,
                        "seconds": round(a.seconds, 3),
                    }
                    for a in answers
                ]
                for model, answers in results.items()
            },
            indent=1,
        )
        await asyncio.to_thread(Path(args.json).write_text, dump)
    header("Voice agent answer accuracy")
    print(f"{len(asked)} questions; voices: {', '.join(voices) or '-'}; default instructions.\n")
    variant = dragoman_server.asr_route_label(args.asr_route)
    report(results, variant + (f", transcription language {args.language}" if args.language else ""))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent_accuracy", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--voices", default="hibari,joe,espeak-en")
    parser.add_argument("--modes", default="typed,spoken")
    parser.add_argument("--limit", type=int, default=0)
    dragoman_server.add_asr_route_option(parser)
    parser.add_argument(
        "--language", help="the spoken sessions' transcription language (default: none, detected)"
    )
    parser.add_argument("--json", help="write every answer to this JSON file")
    parser.add_argument("--rescore", help="judge the answers of an earlier --json file again and report")
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
