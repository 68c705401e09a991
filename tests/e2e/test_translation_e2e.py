"""The interpreter end to end: OpenAI's Realtime translation session on a real `dragoman serve`,
driven by the openai SDK's `client.realtime.translations.connect()`, every server event
validated by the SDK's `RealtimeTranslationServerEvent`.

A real English FLEURS clip (../shared/eval/speech_translation.tsv) is streamed at twice real
time; its translation is scored against the FLORES reference (chrF: a pipeline that loses the
speech, copies the English or translates into the wrong language fails), and spoken in
200 ms frames. Bad input: a wrong format, an unknown language, an unknown model, audio after
`session.close`, a language switch while someone speaks, and a flood next to a live session.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import json
import typing
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import openai.types.realtime as ga_types
import pytest
import sacrebleu
import websockets
from openai import AsyncOpenAI
from pydantic import BaseModel, TypeAdapter

from harness.realtime_helpers import EVAL, b64, load_audio, wer
from harness.server import Server

pytestmark = pytest.mark.e2e

RATE = 24_000
SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(ga_types.RealtimeTranslationServerEvent)
#: The translation of speech against the same server's text MT of the gold transcript (chrF
#: against FLORES, both): simultaneity and ASR errors cost some, a broken pipeline (no text,
#: English, the wrong language) all of it. The floor holds for whichever MT model the server
#: chose on this CPU (the 0.5B on a loaded 2-core machine).
CHRF_RATIO = 0.5


async def text_mt(server: Server, source: str, language: str) -> str:
    """The server's MT of `source` as text: MT protocol v1, one final update."""
    async with websockets.connect(server.ws + "/v1/mt") as ws:
        init = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": language}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "init_ok"
        words = [[word, None, None] for word in source.split()]
        update = {"type": "update", "seq": 1, "utterance_id": 0, "words": words, "clock_ms": 0.0}
        await ws.send(json.dumps(update | {"is_final": True}))
        while True:
            answer = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if answer.get("final"):
                return str(answer["committed_text"])


#: The FLORES column of each target language in speech_translation.tsv.
REFERENCE = {"de": "deu", "zh": "zho_Hans"}


async def assert_translates(
    server: Server, row: dict[str, str], source: str, translation: str, language: str = "de"
) -> None:
    """`translation` translates the clip `row` into `language`: about as close to FLORES as the
    same server's text MT of the gold transcript (chrF), and closer to it than to the English."""
    offline = await text_mt(server, row["src_text"], language)
    reference = row[REFERENCE[language]]
    chrf = sacrebleu.corpus_chrf([translation], [[reference]]).score
    chrf_text = sacrebleu.corpus_chrf([offline], [[reference]]).score
    copied = sacrebleu.corpus_chrf([translation], [[row["src_text"]]]).score
    facts = (source, translation, offline, chrf, chrf_text, copied)
    # No one word: `auto` picks the MT model by this CPU's speed, and the 0.5B has rendered "changes
    # color" without "Farbe" ("Die Käsejuice verändert sich je nach der pH des Käse."). The
    # translation must be in the target language and about as close to the reference as the same server's text MT.
    assert chrf >= CHRF_RATIO * chrf_text and chrf > copied, facts


def clip(index: int) -> dict[str, str]:
    with (EVAL / "speech_translation.tsv").open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))[index]


def client(server: Server, key: str = "") -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.http + "/v1",
        websocket_base_url=server.ws + "/v1",
        api_key=key or "none",
        max_retries=0,
    )


def unknown_fields(value: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(value, BaseModel):
        found += [f"{path}.{key}" for key in value.model_extra or {}]
        for name in type(value).model_fields:
            found += unknown_fields(getattr(value, name), f"{path}.{name}")
    return found


def validate(event: dict[str, Any]) -> None:
    model = SERVER_EVENT.validate_python(event)
    assert unknown_fields(model) == [], unknown_fields(model)


@dataclass
class Heard:
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def text(self, kind: str) -> str:
        return "".join(e["delta"] for e in self.of(kind))

    def errors(self) -> list[dict[str, Any]]:
        return [e["error"] for e in self.of("error")]


async def read(conn: Any, heard: Heard, until: typing.Callable[[dict[str, Any]], bool], limit: float) -> None:
    async def loop() -> None:
        while True:
            event = json.loads(await conn.recv_bytes())
            validate(event)
            heard.events.append(event)
            if until(event):
                return

    await asyncio.wait_for(loop(), limit)


async def stream(conn: Any, audio: np.ndarray, pace: float = 2.0) -> None:
    """200 ms appends, as OpenAI advises, at `pace` times real time."""
    step = RATE // 5
    for start in range(0, len(audio), step):
        await conn.session.input_audio_buffer.append(audio=b64(audio[start : start + step]))
        await asyncio.sleep(0.2 / pace)


def clip_audio(row: dict[str, str]) -> np.ndarray:
    """The clip at 24 kHz, and a breath after the speech shorter than the 500 ms that ends a
    segment: `session.close` flushes it."""
    return np.concatenate([load_audio(row["file"], RATE), np.zeros(int(RATE * 0.3), dtype=np.float32)])


async def interpret(
    conn: Any,
    heard: Heard,
    audio: np.ndarray,
    session: dict[str, Any],
    after_close: typing.Callable[[], typing.Awaitable[None]] | None = None,
) -> None:
    """Configure the session (it must take `session`), stream `audio`, close, and read all that
    comes until `session.closed`; `after_close` runs between the close and the end."""
    await conn.session.update(session=session)
    await read(conn, heard, lambda e: e["type"] in ("session.updated", "error"), 30)
    assert heard.events[-1]["type"] == "session.updated", heard.errors()
    reader = asyncio.create_task(read(conn, heard, lambda e: e["type"] == "session.closed", 300))
    await stream(conn, audio)
    await conn.session.close()
    if after_close is not None:
        await after_close()
    await reader


async def test_english_speech_in_german_text_and_speech_out(server: Server) -> None:
    row = clip(3)
    audio = clip_audio(row)
    heard = Heard()
    async with client(server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)

        async def late() -> None:
            # The close flushes the segment under way. Audio after session.close is refused;
            # the rest of the translation still comes.
            await conn.session.input_audio_buffer.append(audio=b64(audio[:RATE]), event_id="late")

        session = {"audio": {"output": {"language": "de"}, "input": {"transcription": {"model": "whisper"}}}}
        await interpret(conn, heard, audio, session, after_close=late)
    assert heard.events[0]["type"] == "session.created"
    assert heard.events[-1]["type"] == "session.closed"
    (refused,) = heard.errors()
    assert refused["code"] == "session_closed" and refused["event_id"] == "late"

    source = heard.text("session.input_transcript.delta")
    # The source text is the streaming transcription's own (its quality is tested there): here,
    # that it comes, and is the clip's.
    assert wer([row["src_text"]], [source]) < 0.6, source
    # ... heard by Moonshine, the interpreter's default route for English (`interpreter.asr_routes`).
    async with httpx.AsyncClient() as http:
        health = (await http.get(server.http + "/health")).json()
    asr = [e["backend"] for e in health["engines"] if e["role"] == "asr"]
    assert any("interpreter en: moonshine-base-en" in backend for backend in asr), asr
    # ... and spoken by espeak-ng's German, the interpreter's default (`interpreter.voices`).
    assert health["interpreter_languages"]["voices"]["de"] == "espeak-de"
    await assert_translates(server, row, source, heard.text("session.output_transcript.delta"))

    stamped = [e["elapsed_ms"] for e in heard.events if "elapsed_ms" in e]
    assert stamped and all(ms % 200 == 0 for ms in stamped)
    frames = heard.of("session.output_audio.delta")
    assert all(e["sample_rate"] == RATE and e["channels"] == 1 and e["format"] == "pcm16" for e in frames)
    pcm = [base64.b64decode(e["delta"]) for e in frames]
    assert all(len(frame) == RATE // 5 * 2 for frame in pcm), "200 ms frames"
    starts = [e["elapsed_ms"] for e in frames]
    assert starts == sorted(starts) and len(set(starts)) == len(starts), "the audio never overlaps"
    speech = np.frombuffer(b"".join(pcm), dtype=np.int16).astype(np.float32) / 32768
    assert len(speech) / RATE > 1.5 and float(np.sqrt(np.mean(speech**2))) > 0.01, "the translation is spoken"


async def test_english_speech_in_chinese_text_and_speech_out(server: Server) -> None:
    """Into Chinese: MT commits whole words (jieba's), the transcript has no spaces to join
    segments by, and Kokoro speaks it."""
    row = clip(3)
    heard = Heard()
    async with client(server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        await interpret(conn, heard, clip_audio(row), {"audio": {"output": {"language": "zh"}}})
    assert heard.errors() == [] and heard.of("session.input_transcript.delta") == []
    chinese = heard.text("session.output_transcript.delta")
    letters = [char for char in chinese if char.isalpha()]
    han = [char for char in letters if "\u4e00" <= char <= "\u9fff"]
    # Chinese, not the English: the 1.5B may keep a word ("根据 cabbage的酸碱性"), names stay Latin.
    assert len(han) >= 8 and len(han) > len(letters) - len(han), chinese
    await assert_translates(server, row, row["src_text"], chinese, "zh")
    pcm = b"".join(base64.b64decode(e["delta"]) for e in heard.of("session.output_audio.delta"))
    speech = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768
    assert len(speech) / RATE > 1.5 and float(np.sqrt(np.mean(speech**2))) > 0.01, "the translation is spoken"


async def test_bad_input_is_a_clear_error_and_the_session_goes_on(server: Server) -> None:
    heard = Heard()
    async with client(server).realtime.translations.connect(model="dragoman-interpreter") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        assert heard.events[0]["session"]["model"] == "dragoman-interpreter"
        await conn.send_raw(
            json.dumps(
                {
                    "type": "session.update",
                    "session": {"audio": {"input": {"format": {"type": "audio/pcmu"}}}},
                }
            )
        )
        await read(conn, heard, lambda e: e["type"] == "error", 30)
        assert heard.errors()[-1]["param"] == "session.audio.input.format"
        await conn.session.update(session={"audio": {"output": {"language": "fr"}}})
        await read(conn, heard, lambda e: e["type"] == "error", 30)
        unsupported = heard.errors()[-1]
        assert unsupported["code"] == "unsupported_language"
        assert all(lang in unsupported["message"] for lang in ("de", "it", "zh")), unsupported["message"]
        await conn.session.input_audio_buffer.append(audio="%%% not base64")
        await read(conn, heard, lambda e: e["type"] == "error", 30)
        assert heard.errors()[-1]["type"] == "invalid_request_error"
        # Still the same session, still German, and it closes cleanly.
        await conn.session.close()
        await read(conn, heard, lambda e: e["type"] == "session.closed", 30)
    assert len(heard.errors()) == 3


async def test_an_unknown_model_is_refused(server: Server) -> None:
    async with client(server).realtime.translations.connect(model="gpt-4o-realtime-preview") as conn:
        event = json.loads(await asyncio.wait_for(conn.recv_bytes(), 30))
        validate(event)
        assert event["type"] == "error" and event["error"]["code"] == "model_not_found"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(conn.recv_bytes(), 30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


async def test_a_language_switch_mid_speech_applies_from_the_next_segment(server: Server) -> None:
    first, second = clip(0), clip(3)
    a, b = load_audio(first["file"], RATE), load_audio(second["file"], RATE)
    pause = np.zeros(int(RATE * 1.5), dtype=np.float32)
    heard = Heard()
    async with client(server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        reader = asyncio.create_task(read(conn, heard, lambda e: e["type"] == "session.closed", 400))
        half = len(a) // 2
        await stream(conn, a[:half])
        await conn.session.update(session={"audio": {"output": {"language": "it"}}})  # mid-sentence
        await stream(conn, np.concatenate([a[half:], pause, b, pause]))
        await conn.session.close()
        await reader
    assert not heard.errors(), heard.errors()
    (updated,) = heard.of("session.updated")
    assert updated["session"]["audio"]["output"]["language"] == "it"
    text = heard.text("session.output_transcript.delta")
    # The sentence under way stays German; the next is Italian.
    german_first = sacrebleu.corpus_chrf([text], [[first["deu"] + " " + second["ita"]]]).score
    italian_first = sacrebleu.corpus_chrf([text], [[first["ita"] + " " + second["ita"]]]).score
    all_german = sacrebleu.corpus_chrf([text], [[first["deu"] + " " + second["deu"]]]).score
    assert german_first > max(italian_first, all_german), (text, german_first, italian_first, all_german)


async def test_a_flood_next_to_a_live_session_is_refused_past_its_burst(server: Server) -> None:
    """30 s of audio sent at once into one translation session while another streams at real
    time: past the 10 s burst (`audio_burst_s`) the flood's appends are refused with an `error`
    (`input_audio_buffer_backlog`), its socket is still read (an update is answered), and the
    live session's speech is translated."""
    row = clip(3)
    live_audio = clip_audio(row)
    flood_audio = np.concatenate([load_audio(clip(0)["file"], RATE)] * 4)[: 30 * RATE]
    streaming = asyncio.Event()

    async def live() -> Heard:
        heard = Heard()
        async with client(server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
            await read(conn, heard, lambda e: e["type"] == "session.created", 30)
            await conn.session.update(
                session={
                    "audio": {"output": {"language": "de"}, "input": {"transcription": {"model": "whisper"}}}
                }
            )
            reader = asyncio.create_task(read(conn, heard, lambda e: e["type"] == "session.closed", 300))
            await stream(conn, live_audio[:RATE], pace=1.0)
            streaming.set()  # a second at real-time pace: the server counts this session live
            await stream(conn, live_audio[RATE:], pace=1.0)
            await conn.session.close()
            await reader
        return heard

    async def flood() -> Heard:
        await asyncio.wait_for(streaming.wait(), 60)
        heard = Heard()
        async with client(server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
            await read(conn, heard, lambda e: e["type"] == "session.created", 30)
            for start in range(0, len(flood_audio), RATE):
                await conn.session.input_audio_buffer.append(audio=b64(flood_audio[start : start + RATE]))
            await conn.session.update(session={"audio": {"output": {"language": "it"}}})
            await read(conn, heard, lambda e: e["type"] == "session.updated", 60)
        return heard

    spoken, flooded = await asyncio.gather(live(), flood())
    refused = [e for e in flooded.errors() if e["code"] == "input_audio_buffer_backlog"]
    assert refused and "faster than real time" in refused[0]["message"], flooded.errors()
    assert len(refused) < 30, "the first seconds of its burst were taken"
    assert not spoken.errors(), spoken.errors()
    source = spoken.text("session.input_transcript.delta")
    await assert_translates(server, row, source, spoken.text("session.output_transcript.delta"))


async def test_an_ephemeral_key_opens_one_translation_session_with_its_config(server: Server) -> None:
    secret = await client(server).realtime.translations.client_secrets.create(
        session={"model": "gpt-realtime-translate", "audio": {"output": {"language": "zh"}}},
        expires_after={"anchor": "created_at", "seconds": 600},
    )
    assert secret.value.startswith("ek_")
    assert secret.session.type == "translation" and secret.session.audio.output is not None
    assert secret.session.audio.output.language == "zh"
    heard = Heard()
    async with client(server, secret.value).realtime.translations.connect(
        model="gpt-realtime-translate"
    ) as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
    (created,) = heard.events
    assert created["session"]["audio"]["output"]["language"] == "zh"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with client(server, secret.value).realtime.translations.connect(model="gpt-realtime-translate"):
            pass
    assert refused.value.response.status_code == 401, "a key opens one session"
