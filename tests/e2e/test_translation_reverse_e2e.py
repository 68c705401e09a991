"""The interpreter's reverse direction end to end: a real German FLEURS clip
(../shared/eval/speech_translation.tsv) through OpenAI's Realtime translation session on a real
`dragoman serve` whose speakers speak German (`interpreter.source_language = "de"`), driven by
the openai SDK, every server event validated; the English transcript is scored against the FLORES
reference next to the same server's text MT of the gold German (chrF), and spoken.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import sacrebleu
import websockets

from harness.server import Server, start, stop
from tests.e2e.test_translation_e2e import CHRF_RATIO, RATE, Heard, client, clip, clip_audio, interpret, read

pytestmark = pytest.mark.e2e

#: The first German clip of speech_translation.tsv (FLORES devtest line 730).
GERMAN_CLIP = 5


@pytest.fixture(scope="module")
def german_server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """The interpreter and MT protocol v1, on the 1.5B (the model with calibrated de-en heads on every CPU)."""
    folder = tmp_path_factory.mktemp("serve-de")
    settings = folder / "dragoman.toml"
    settings.write_text('[interpreter]\nsource_language = "de"\n', encoding="utf-8")
    args = ["serve", "--config", str(settings), "--cache-dir", str(cache_dir)]
    running = start([*args, "--services", "mt", "interpreter", "--preset", "low_latency"], folder / "log")
    yield running
    stop(running)


async def text_mt(server: Server, source: str) -> str:
    """The server's de-en MT of `source` as text: MT protocol v1, one final update."""
    async with websockets.connect(server.ws + "/v1/mt") as ws:
        init = {"type": "init", "protocol_version": 1, "source_lang": "de", "target_lang": "en"}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "init_ok"
        words = [[word, None, None] for word in source.split()]
        update = {"type": "update", "seq": 1, "utterance_id": 0, "words": words, "clock_ms": 0.0}
        await ws.send(json.dumps(update | {"is_final": True}))
        while True:
            answer = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if answer.get("final"):
                return str(answer["committed_text"])


async def test_german_speech_in_english_text_and_speech_out(german_server: Server) -> None:
    row = clip(GERMAN_CLIP)
    assert row["src_lang"] == "de"
    audio = clip_audio(row)
    heard = Heard()
    async with client(german_server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        # The server serves English only: German is refused with the list, English taken.
        await conn.session.update(session={"audio": {"output": {"language": "de"}}})
        await read(conn, heard, lambda e: e["type"] in ("session.updated", "error"), 30)
        assert heard.errors() and heard.errors()[-1]["code"] == "unsupported_language"
        session = {"audio": {"output": {"language": "en"}, "input": {"transcription": {"model": "whisper"}}}}
        await interpret(conn, heard, audio, session)

    source = heard.text("session.input_transcript.delta")
    english = heard.text("session.output_transcript.delta")
    offline = await text_mt(german_server, row["src_text"])
    chrf = sacrebleu.corpus_chrf([english], [[row["eng"]]]).score
    chrf_text = sacrebleu.corpus_chrf([offline], [[row["eng"]]]).score
    copied = sacrebleu.corpus_chrf([english], [[row["src_text"]]]).score
    facts = (source, english, offline, chrf, chrf_text, copied)
    assert chrf >= CHRF_RATIO * chrf_text and chrf > copied, facts
    frames = [base64.b64decode(e["delta"]) for e in heard.of("session.output_audio.delta")]
    speech = np.frombuffer(b"".join(frames), dtype=np.int16).astype(np.float32) / 32768
    assert len(speech) / RATE > 1.5 and float(np.sqrt(np.mean(speech**2))) > 0.01, "spoken in English"


@pytest.fixture(scope="module")
def auto_server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """The interpreter for speakers of every source language (`source_language = "auto"`), its
    German spoken by Kokoro's sara (`interpreter.voices`, in place of the default espeak-de)."""
    folder = tmp_path_factory.mktemp("serve-auto")
    settings = folder / "dragoman.toml"
    toml = '[interpreter]\nsource_language = "auto"\nvoices = { de = "kokoro-de-sara" }\n'
    settings.write_text(toml, encoding="utf-8")
    args = ["serve", "--config", str(settings), "--cache-dir", str(cache_dir)]
    running = start([*args, "--services", "mt", "interpreter", "--preset", "low_latency"], folder / "log")
    yield running
    stop(running)


async def translated(server: Server, audio: np.ndarray, target: str) -> Heard:
    """One translation session of `audio` into `target`, closed after it."""
    heard = Heard()
    async with client(server).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        await interpret(conn, heard, audio, {"audio": {"output": {"language": target}}})
    return heard


async def test_one_server_interprets_both_sides_of_a_conversation(auto_server: Server) -> None:
    """Two people, one server: the German speaker's session into English and the English
    speaker's into German, each segment's language detected by Whisper."""
    async with httpx.AsyncClient() as http:
        offered = (await http.get(auto_server.http + "/health")).json()["interpreter_languages"]
    # What the demo page offers: every source with a direction, every target with a voice.
    assert {"en", "de"} <= set(offered["sources"]) and {"en", "de"} <= set(offered["targets"]), offered
    assert offered["voices"]["de"] == "kokoro-de-sara" and offered["voices"]["en"] == "hibari", offered
    german, english = clip(GERMAN_CLIP), clip(3)
    from_german = await translated(auto_server, clip_audio(german), "en")
    from_english = await translated(auto_server, clip_audio(english), "de")
    assert not from_german.errors() and not from_english.errors()
    into_english = from_german.text("session.output_transcript.delta")
    into_german = from_english.text("session.output_transcript.delta")
    for text, row, reference in ((into_english, german, "eng"), (into_german, english, "deu")):
        chrf = sacrebleu.corpus_chrf([text], [[row[reference]]]).score
        copied = sacrebleu.corpus_chrf([text], [[row["src_text"]]]).score
        # Translated, not passed through: nearer the reference than the speech's own words.
        assert text and chrf > copied, (text, chrf, copied)
    pcm = b"".join(base64.b64decode(e["delta"]) for e in from_english.of("session.output_audio.delta"))
    speech = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768
    assert len(speech) / RATE > 1.0 and float(np.sqrt(np.mean(speech**2))) > 0.01, "the German is spoken"
