"""`/v1/realtime?intent=transcription` against a real `dragoman serve`, driven by the openai SDK.

`server` (tests/e2e/conftest.py) is the one `dragoman serve`, with every service, that
test_serve_all drives too: the MT engine it also holds sits idle here.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any, cast

import numpy as np
import pytest
from openai import AsyncOpenAI
from openai.types.realtime import RealtimeTranscriptionSessionCreateRequestParam
from openai.types.realtime.realtime_transcription_session_audio_input_turn_detection_param import (
    SemanticVad,
    ServerVad,
)
from prometheus_client.parser import text_string_to_metric_families

from dragoman.engines.asr.chinese_script import write
from harness.realtime_helpers import (
    Transcript,
    b64,
    load_audio,
    read_until,
    reference,
    stream,
    wer,
)
from harness.server import Server

pytestmark = pytest.mark.e2e

EN = "asr/en/en_ls-testclean_1995-1837-0001.wav"
EN_2 = "asr/en/en_ls-devclean_1272-128104-0000.wav"
EN_3 = "asr/en/en_ls-testclean_6930-75918-0000.flac"
DE = "asr/de/de_fleurs_test_000.ogg"
ZH = "asr/zh/zh_fleurs_cmn_1883.wav"
FIRST_WORD = "asr/en/en_fleurs_test_000.ogg"
#: A client that ends its turns with `input_audio_buffer.commit` turns the server's VAD off,
#: as it must with OpenAI, whose transcription sessions start with `server_vad`.
PUSH_TO_TALK: RealtimeTranscriptionSessionCreateRequestParam = {
    "type": "transcription",
    "audio": {"input": {"turn_detection": None}},
}
#: OpenAI's default `turn_detection`, as its session object shows it.
DEFAULT_TURNS = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300, "silence_duration_ms": 500}


def client(server: Server) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.http + "/v1", websocket_base_url=server.ws + "/v1", api_key="sk-local", max_retries=0
    )


def is_completed(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "conversation.item.input_audio_transcription.completed")


def check_item(transcript: Transcript, item: dict[str, Any]) -> None:
    """Deltas are append-only: their concatenation is a prefix of the final transcript."""
    sent = transcript.deltas(item["item_id"])
    assert item["transcript"].startswith(sent), (sent, item["transcript"])
    assert item["usage"]["type"] == "duration" and item["usage"]["seconds"] > 0


async def transcribe_once(server: Server, file: str, **update: Any) -> Transcript:
    """A GA client: 24 kHz (the GA default) streamed in 100 ms appends, then a commit."""
    audio = load_audio(file, 24_000)
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.session.update(session=PUSH_TO_TALK)
        await read_until(conn, transcript, lambda e: e["type"] == "session.updated")
        if update:
            # `update` may carry this server's extensions (an `mstar.*` include) that the
            # SDK's types do not declare: sent as given.
            session = cast(
                RealtimeTranscriptionSessionCreateRequestParam, {"type": "transcription", **update}
            )
            await conn.session.update(session=session)
            await read_until(conn, transcript, lambda e: e["type"] in ("session.updated", "error"))
        await stream(conn, audio, 24_000)
        await conn.input_audio_buffer.commit()
        return await read_until(conn, transcript, is_completed)


async def test_health_and_models(server: Server) -> None:
    def get(path: str) -> Any:
        with urllib.request.urlopen(server.http + path, timeout=10) as response:
            return json.loads(response.read())

    health = get("/health")
    assert health["status"] == "ok" and health["services"]["transcription"] is True
    models = get("/v1/models")
    assert models["object"] == "list"
    assert "whisper-base" in [m["id"] for m in models["data"]]


async def test_english_24khz_ga_client(server: Server) -> None:
    # The client asks for this server's partial hypotheses (none go out unasked).
    transcript = await transcribe_once(server, EN, include=["mstar.transcription.partial"])
    (item,) = transcript.completed
    assert wer([reference(EN)], [item["transcript"]]) <= 0.15, item["transcript"]
    check_item(transcript, item)
    # Partial hypotheses arrived while the audio streamed, ahead of the completion.
    partials = transcript.of("mstar.transcription.partial")
    assert partials and all(p["item_id"] == item["item_id"] for p in partials)
    assert transcript.events.index(partials[0]) < transcript.events.index(item)
    # 8.7 s of 24 kHz audio reports 8.7 s: the client's timeline, not the resampled one.
    assert item["usage"]["seconds"] == pytest.approx(8.73, abs=0.05)


async def test_noise_reduction_is_taken_and_leaves_clean_speech_whole(server: Server) -> None:
    """`audio.input.noise_reduction` filters the input before the VAD and the model (the unit
    tests show the noise cut): the update shows it, and clean speech is still heard."""
    near_field = {"input": {"noise_reduction": {"type": "near_field"}}}
    transcript = await transcribe_once(server, EN, audio=near_field)
    updated = [e for e in transcript.events if e["type"] == "session.updated"][-1]
    assert updated["session"]["audio"]["input"]["noise_reduction"] == {"type": "near_field", "strength": 1.0}
    (item,) = transcript.completed
    assert wer([reference(EN)], [item["transcript"]]) <= 0.15, item["transcript"]


async def test_english_pcm16_beta_client(server: Server) -> None:
    audio = load_audio(EN_2, 16_000)
    api = client(server)
    async with api.beta.realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(
            conn, Transcript(), lambda e: e["type"] == "transcription_session.created"
        )
        created = transcript.events[0]["session"]
        assert created["input_audio_format"] == "pcm16"
        assert created["turn_detection"] == DEFAULT_TURNS
        await conn.transcription_session.update(
            session={
                "input_audio_transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": None,  # type: ignore[typeddict-item]
                "mstar": {"chunk_seconds": "1.0", "unfixed_chunks": 1, "unfixed_tokens": 3},
            }
        )
        await read_until(conn, transcript, lambda e: e["type"] == "transcription_session.updated")
        await stream(conn, audio, 16_000, piece_seconds=0.25)
        await conn.input_audio_buffer.commit()
        await read_until(conn, transcript, is_completed)
    updated = transcript.of("transcription_session.updated")[0]["session"]
    assert updated["mstar"]["chunk_seconds"] == 1.0 and updated["mstar"]["unfixed_tokens"] == 3
    (item,) = transcript.completed
    assert wer([reference(EN_2)], [item["transcript"]]) <= 0.2, item["transcript"]
    check_item(transcript, item)
    # With the prefix forced from the first step on, firm text arrives as deltas before the end.
    assert transcript.deltas(item["item_id"])


async def test_german(server: Server) -> None:
    transcript = await transcribe_once(server, DE, audio={"input": {"transcription": {"language": "de"}}})
    (item,) = transcript.completed
    assert wer([reference(DE)], [item["transcript"]], language="de") <= 0.45, item["transcript"]
    check_item(transcript, item)


async def test_mandarin_is_written_in_simplified_characters(server: Server) -> None:
    # Whisper base writes this clip mostly in traditional characters ("該項目於…"); every step,
    # forced prefixes included, comes out in the server's script (asr.chinese_script).
    transcript = await transcribe_once(server, ZH, audio={"input": {"transcription": {"language": "zh"}}})
    (item,) = transcript.completed
    assert write(item["transcript"], "zh", "simplified") == item["transcript"], item["transcript"]
    assert wer([reference(ZH)], [item["transcript"]], language="zh") <= 0.3, item["transcript"]
    check_item(transcript, item)


async def test_a_session_starts_with_openais_server_vad(server: Server) -> None:
    """A client that configures nothing gets OpenAI's default: its turns end by server_vad."""
    gap = np.zeros(24_000, dtype=np.float32)
    audio = np.concatenate([gap[: 24_000 // 2], load_audio(EN_3, 24_000), gap])
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await stream(conn, audio, 24_000, piece_seconds=0.2)
        await read_until(conn, transcript, is_completed)
    created = transcript.events[0]["session"]
    assert created["audio"]["input"]["turn_detection"] == DEFAULT_TURNS
    # No commit was sent: the server's VAD ended the turn, 500 ms into the silence after it.
    (started,) = transcript.of("input_audio_buffer.speech_started")
    (stopped,) = transcript.of("input_audio_buffer.speech_stopped")
    (committed,) = transcript.of("input_audio_buffer.committed")
    assert started["item_id"] == stopped["item_id"] == committed["item_id"]
    (item,) = transcript.completed
    assert item["item_id"] == committed["item_id"]
    assert wer([reference(EN_3)], [item["transcript"]]) <= 0.2, item["transcript"]
    assert not transcript.errors()


async def test_server_vad_splits_utterances_joined_with_silence(server: Server) -> None:
    files = [EN_3, EN_2]
    gap = np.zeros(int(1.5 * 24_000), dtype=np.float32)
    audio = np.concatenate(
        [gap[: 24_000 // 2], load_audio(files[0], 24_000), gap, load_audio(files[1], 24_000), gap]
    )
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "transcription": {"language": "en"},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 600},
                    }
                },
            }
        )
        await stream(conn, audio, 24_000, piece_seconds=0.2)
        await read_until(conn, transcript, lambda e: len(transcript.completed) == 2)
    started = transcript.of("input_audio_buffer.speech_started")
    stopped = transcript.of("input_audio_buffer.speech_stopped")
    committed = transcript.of("input_audio_buffer.committed")
    assert len(started) == len(stopped) == len(committed) == 2
    # The turns sit where the recordings are on the session's timeline.
    first_end = 500 + 3500
    assert abs(started[0]["audio_start_ms"] - 500) <= 500
    assert first_end - 300 <= stopped[0]["audio_end_ms"] <= first_end + 1500
    assert started[1]["audio_start_ms"] >= stopped[0]["audio_end_ms"]
    assert [c["item_id"] for c in committed] == [s["item_id"] for s in started]
    assert committed[1]["previous_item_id"] == committed[0]["item_id"]
    for item, file in zip(transcript.completed, files, strict=True):
        assert wer([reference(file)], [item["transcript"]]) <= 0.2, item["transcript"]
        check_item(transcript, item)


async def test_a_short_first_word_set_off_by_a_pause_is_transcribed(server: Server) -> None:
    """FLEURS "However, | due to the slow ...": "However," is shorter than a turn's gate and a
    pause follows; server_vad's turn must still hold it (`streaming/turn_onset.py`)."""
    audio = load_audio(FIRST_WORD, 24_000)
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"transcription": {"language": "en"}}}}
        )
        await stream(conn, audio, 24_000, piece_seconds=0.2)
        await stream(conn, np.zeros(24_000, dtype=np.float32), 24_000, piece_seconds=0.2)
        await read_until(conn, transcript, lambda e: bool(transcript.completed))
    first = transcript.completed[0]["transcript"]
    assert first.strip().lower().startswith("however"), first
    assert transcript.of("input_audio_buffer.speech_started")[0]["audio_start_ms"] <= 1000


async def test_semantic_vad_ends_turns_of_real_recordings(server: Server) -> None:
    files = [EN_3, EN_2]
    gap = np.zeros(int(1.5 * 24_000), dtype=np.float32)
    tail = np.zeros(5 * 24_000, dtype=np.float32)  # past auto's 4 s max timeout
    audio = np.concatenate(
        [gap[: 24_000 // 2], load_audio(files[0], 24_000), gap, load_audio(files[1], 24_000), tail]
    )
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        semantic: SemanticVad = {"type": "semantic_vad", "eagerness": "auto"}
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {"input": {"transcription": {"language": "en"}, "turn_detection": semantic}},
            }
        )
        await read_until(conn, transcript, lambda e: e["type"] in ("session.updated", "error"))
        assert transcript.events[-1]["type"] == "session.updated", transcript.events[-1]
        assert transcript.events[-1]["session"]["audio"]["input"]["turn_detection"] == semantic
        await stream(conn, audio, 24_000, piece_seconds=0.2)
        await read_until(conn, transcript, lambda e: len(transcript.completed) == 2)
    started = transcript.of("input_audio_buffer.speech_started")
    stopped = transcript.of("input_audio_buffer.speech_stopped")
    assert len(started) == len(stopped) == 2
    # A whole sentence ends at its first pause (200 ms), before server_vad's 500 ms of silence
    # would, and long before auto's 4 s max timeout.
    first_end = 500 + 3500
    assert abs(started[0]["audio_start_ms"] - 500) <= 500
    assert first_end - 300 <= stopped[0]["audio_end_ms"] <= first_end + 400
    assert started[1]["audio_start_ms"] >= stopped[0]["audio_end_ms"]
    for item, file in zip(transcript.completed, files, strict=True):
        assert wer([reference(file)], [item["transcript"]]) <= 0.2, item["transcript"]
        check_item(transcript, item)


def errors_counted(server: Server) -> dict[str, float]:
    """`dragoman_errors_total` of /metrics, by code."""
    with urllib.request.urlopen(server.http + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        sample.labels["code"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "dragoman_errors_total"
    }


async def test_error_paths_leave_the_session_usable(server: Server) -> None:
    counted = errors_counted(server)
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.session.update(session=PUSH_TO_TALK)

        async def expect_error(event: dict[str, Any]) -> dict[str, Any]:
            await conn.send(event)  # type: ignore[arg-type]
            await read_until(conn, transcript, lambda e: e["type"] == "error")
            error: dict[str, Any] = transcript.of("error")[-1]["error"]
            return error

        bad_audio = await expect_error(
            {"type": "input_audio_buffer.append", "audio": "not*base64", "event_id": "e1"}
        )
        assert bad_audio["code"] == "invalid_audio" and bad_audio["event_id"] == "e1"
        bad_update = await expect_error(
            {"type": "session.update", "session": {"type": "transcription", "mstar": {"unfixed_tokens": -2}}}
        )
        assert bad_update["param"] == "session.mstar.unfixed_tokens"
        assert (await expect_error({"type": "input_audio_buffer.commit"}))[
            "code"
        ] == "input_audio_buffer_commit_empty"
        assert (await expect_error({"type": "response.create"}))["code"] == "invalid_event"
        too_long = np.zeros(31 * 24_000, dtype=np.float32)
        refused = await expect_error({"type": "input_audio_buffer.append", "audio": b64(too_long)})
        assert refused["code"] == "input_audio_buffer_too_long"

        # A language the model refuses: the engine's 4xx message is quoted.
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"transcription": {"language": "xx"}}}}
        )
        await stream(conn, load_audio(EN_3, 24_000), 24_000, piece_seconds=0.5)
        await conn.input_audio_buffer.commit()
        await read_until(
            conn, transcript, lambda e: e["type"] == "conversation.item.input_audio_transcription.failed"
        )
        failed = transcript.of("conversation.item.input_audio_transcription.failed")[0]["error"]
        assert failed["type"] == "invalid_request_error" and "xx" in failed["message"]
        assert "/" not in failed["message"], "no server path reaches the client"
        # Each error sent is counted once in /metrics, by its code.
        now = errors_counted(server)
        for code in ("invalid_audio", "input_audio_buffer_commit_empty", "input_audio_buffer_too_long"):
            assert now.get(code, 0) == counted.get(code, 0) + 1, code
        assert now.get(failed["code"], 0) >= counted.get(failed["code"], 0) + 1

        # And the session still transcribes.
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"transcription": {"language": "en"}}}}
        )
        await stream(conn, load_audio(EN_3, 24_000), 24_000, piece_seconds=0.5)
        await conn.input_audio_buffer.commit()
        await read_until(conn, transcript, is_completed)
    assert wer([reference(EN_3)], [transcript.completed[-1]["transcript"]]) <= 0.2


async def test_binary_frames_and_other_intents_are_refused(server: Server) -> None:
    import websockets

    async with websockets.connect(server.ws + "/v1/realtime?intent=transcription") as ws:
        json.loads(await ws.recv())
        await ws.send(b"\x00\x01")
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["error"]["code"] == "invalid_event"
    async with websockets.connect(server.ws + "/v1/realtime?intent=translation") as ws:
        error = json.loads(await ws.recv())
        assert error["error"]["code"] == "unsupported_intent"
    async with websockets.connect(server.ws + "/v1/realtime?model=x") as ws:
        created = json.loads(await ws.recv())
        assert created["session"]["type"] == "realtime", "no intent: the voice agent"


async def test_concurrent_sessions_get_their_own_transcripts(server: Server) -> None:
    results = await asyncio.gather(
        transcribe_once(server, EN, audio={"input": {"transcription": {"language": "en"}}}),
        transcribe_once(server, EN_2, audio={"input": {"transcription": {"language": "en"}}}),
    )
    for transcript, file in zip(results, [EN, EN_2], strict=True):
        (item,) = transcript.completed
        assert wer([reference(file)], [item["transcript"]]) <= 0.2, item["transcript"]
        check_item(transcript, item)


async def test_idle_timeout_commits_the_silence_after_a_turn(server: Server) -> None:
    audio = np.concatenate([load_audio(EN_3, 24_000), np.zeros(7 * 24_000, dtype=np.float32)])
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        turn: ServerVad = {"type": "server_vad", "silence_duration_ms": 600, "idle_timeout_ms": 5000}
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"turn_detection": turn}}}
        )
        await stream(conn, audio, 24_000, piece_seconds=0.2)
        await read_until(conn, transcript, lambda e: len(transcript.completed) == 2)
    (updated,) = transcript.of("session.updated")
    assert updated["session"]["audio"]["input"]["turn_detection"]["idle_timeout_ms"] == 5000
    (stopped,) = transcript.of("input_audio_buffer.speech_stopped")
    (triggered,) = transcript.of("input_audio_buffer.timeout_triggered")
    # The timer ran from the end of the turn, over 5 s of the silence after it.
    assert triggered["audio_start_ms"] == stopped["audio_end_ms"]
    assert 5000 <= triggered["audio_end_ms"] - triggered["audio_start_ms"] < 5100
    committed = transcript.of("input_audio_buffer.committed")
    assert [c["item_id"] for c in committed] == [stopped["item_id"], triggered["item_id"]]
    assert transcript.completed[1]["item_id"] == triggered["item_id"]
    assert wer([reference(EN_3)], [transcript.completed[0]["transcript"]]) <= 0.2
    assert not transcript.errors()


async def test_a_flood_next_to_a_live_session_is_refused_past_its_burst_and_stays_connected(
    server: Server,
) -> None:
    """30 s of audio sent at once while another session streams at real time: past the 10 s
    burst (`audio_burst_s`) its appends are refused with an error, its socket is still read
    (so its keepalive pings are answered), and the live session's item completes."""
    live_audio = load_audio(EN, 24_000)
    flood_audio = np.concatenate([load_audio(EN_3, 24_000)] * 4)[: 30 * 24_000]
    live_streaming = asyncio.Event()

    async def live() -> Transcript:
        async with client(server).realtime.connect(
            model="whisper-base", extra_query={"intent": "transcription"}
        ) as conn:
            transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
            await stream(conn, live_audio[:24_000], 24_000, pace=1.0)
            live_streaming.set()  # a second of audio sent at real-time pace: the server counts it live
            await stream(conn, live_audio[24_000:], 24_000, pace=1.0)
            await conn.input_audio_buffer.commit()
            return await read_until(conn, transcript, is_completed)

    async def flood() -> Transcript:
        await asyncio.wait_for(live_streaming.wait(), 60)
        async with client(server).realtime.connect(
            model="whisper-base", extra_query={"intent": "transcription"}
        ) as conn:
            transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
            await stream(conn, flood_audio, 24_000, piece_seconds=1.0)
            await conn.session.update(session={"type": "transcription"})
            return await read_until(conn, transcript, lambda e: e["type"] == "session.updated", limit=30)

    spoken, flooded = await asyncio.gather(live(), flood())
    refused = [e for e in flooded.errors() if e["code"] == "input_audio_buffer_backlog"]
    assert refused and "faster than real time" in refused[0]["message"], flooded.errors()
    assert len(refused) < 30, "the first seconds of its burst were taken"
    (item,) = spoken.completed
    assert wer([reference(EN)], [item["transcript"]]) <= 0.15, item["transcript"]
