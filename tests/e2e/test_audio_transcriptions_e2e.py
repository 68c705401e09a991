"""`POST /v1/audio/transcriptions` against a real `dragoman serve --services transcription`,
driven by the `openai` SDK's `client.audio.transcriptions.create` on real recordings from
../shared/eval, re-encoded here with real encoders into each format the endpoint takes."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from openai import OpenAI
from openai.types.audio import Transcription, TranscriptionVerbose
from openai.types.audio.transcription_text_delta_event import TranscriptionTextDeltaEvent
from openai.types.audio.transcription_text_done_event import TranscriptionTextDoneEvent

from harness.audio_files import FORMATS, encode
from harness.realtime_helpers import EVAL, load_audio, reference, wer
from harness.server import Server, start, stop

KEY = "test-file-key"
#: Uploads past this get 413; the long file below (flac) stays under it.
MAX_BYTES = 2_000_000
CLIP = "asr/en/en_ls-testclean_1995-1837-0001.wav"
#: Clean English read speech, concatenated with short pauses into the long file (> 60 s).
LONG = [
    "asr/en/en_ls-devclean_1272-128104-0000.wav",
    "asr/en/en_ls-testclean_1995-1837-0001.wav",
    "asr/en/en_ls-devclean_2412-153948-0000.flac",
    "asr/en/en_ls-devclean_1272-141231-0002.flac",
    "asr/en/en_jfk_inaugural_1961.flac",
    "asr/en/en_pvcheetah_test_en.wav",
    "asr/en/en_ls-testclean_6930-75918-0000.flac",
    "asr/en/en_ls-devclean_1272-128104-0000.wav",
    "asr/en/en_ls-devclean_2412-153948-0000.flac",
    "asr/en/en_jfk_inaugural_1961.flac",
]
RATE = 16_000


@pytest.fixture(scope="module")
def files_server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("files") / "dragoman.log"
    args = ["serve", "--services", "transcription", "--cache-dir", str(cache_dir), "--api-key", KEY]
    # Two files at once and none waiting, so that a third is refused (test_a_flood_gets_429).
    os.environ["DRAGOMAN_TRANSCRIPTION__FILES__MAX_WAITING"] = "0"
    try:
        running = start([*args, "--max-file-bytes", str(MAX_BYTES)], log, timeout=600.0)
    finally:
        del os.environ["DRAGOMAN_TRANSCRIPTION__FILES__MAX_WAITING"]
    yield running
    stop(running)


@pytest.fixture(scope="module")
def client(files_server: Server) -> OpenAI:
    return OpenAI(base_url=files_server.http + "/v1", api_key=KEY, max_retries=0, timeout=600.0)


@pytest.fixture(scope="module")
def long_file() -> tuple[bytes, str, float]:
    pause = np.zeros(int(0.6 * RATE), dtype=np.float32)
    parts = [piece for file in LONG for piece in (load_audio(file), pause)]
    audio = np.concatenate(parts)
    return encode(audio, RATE, "flac"), " ".join(reference(f) for f in LONG), len(audio) / RATE


@pytest.mark.parametrize("extension", sorted(FORMATS))
def test_each_format_is_transcribed(client: OpenAI, extension: str) -> None:
    data = encode(load_audio(CLIP, 44_100), 44_100, extension, channels=2)
    result = client.audio.transcriptions.create(file=(f"clip.{extension}", data), model="whisper-1")
    assert isinstance(result, Transcription)
    assert wer([reference(CLIP)], [result.text]) <= 0.2, result.text
    assert result.usage is not None and result.usage.type == "duration"
    assert result.usage.seconds == pytest.approx(8.73, abs=0.1)


def test_verbose_json_has_timed_segments(client: OpenAI) -> None:
    file = "asr/en/en_jfk_inaugural_1961.flac"
    raw = client.audio.transcriptions.with_raw_response.create(
        file=_eval(file),
        model="whisper-1",
        response_format="verbose_json",
        timestamp_granularities=["segment"],
        language="en",
    )
    assert raw.headers["openai-model"] == "whisper-base"  # the engine that served it, honestly
    result = TranscriptionVerbose.model_validate(raw.parse().model_dump())
    assert result.language == "english" and result.duration == pytest.approx(11.0, abs=0.05)
    assert wer([reference(file)], [result.text]) <= 0.1, result.text
    assert result.segments and len(result.segments) == 1
    segment = result.segments[0]
    # The speech starts a moment in and ends before the file does.
    assert 0.0 <= segment.start < 1.0 and 9.5 < segment.end <= 11.0
    assert segment.avg_logprob < 0 and 0 <= segment.no_speech_prob < 0.5 and segment.tokens


def test_text_srt_and_vtt(client: OpenAI) -> None:
    file = _eval("asr/en/en_jfk_inaugural_1961.flac")
    text = client.audio.transcriptions.create(file=file, model="whisper-1", response_format="text")
    srt = client.audio.transcriptions.create(file=file, model="whisper-1", response_format="srt")
    vtt = client.audio.transcriptions.create(file=file, model="whisper-1", response_format="vtt")
    assert isinstance(text, str) and "ask not what your country" in text.lower()
    lines = srt.split("\n")
    assert lines[0] == "1" and lines[1].startswith("00:00:00,") and " --> 00:00:1" in lines[1]
    assert lines[2].strip() == text.strip()
    assert vtt.startswith("WEBVTT\n\n00:00:00.") and text.strip() in vtt


def test_stream_true_sends_deltas_then_done(client: OpenAI, long_file: tuple[bytes, str, float]) -> None:
    data, ref, _ = long_file
    stream = client.audio.transcriptions.create(file=("long.flac", data), model="whisper-1", stream=True)
    events = list(stream)
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    done = [e for e in events if e.type == "transcript.text.done"]
    assert len(done) == 1 and events[-1] is done[0] and len(deltas) >= 3
    for event in deltas:
        TranscriptionTextDeltaEvent.model_validate(event.model_dump())
    final = TranscriptionTextDoneEvent.model_validate(done[0].model_dump())
    assert "".join(e.delta for e in deltas) == final.text
    assert wer([ref], [final.text]) <= 0.15, final.text
    assert final.usage is not None and final.usage.output_tokens > 50


def test_a_long_file_is_cut_into_windows_at_pauses(
    client: OpenAI, long_file: tuple[bytes, str, float]
) -> None:
    data, ref, seconds = long_file
    assert seconds > 60
    result = client.audio.transcriptions.create(
        file=("long.flac", data), model="whisper-1", response_format="verbose_json"
    )
    assert result.duration == pytest.approx(seconds, abs=0.1)
    assert wer([ref], [result.text]) <= 0.15, result.text
    segments = result.segments or []
    # Ten recordings, each a sentence or more: the windows (at most 28 s) are cut into sentences.
    assert len(segments) >= 10 and max(s.end - s.start for s in segments) <= 20.0
    assert len({s.seek for s in segments}) >= 3  # at least three windows
    assert [s.id for s in segments] == list(range(len(segments)))
    for before, after in itertools.pairwise(segments):
        assert before.end <= after.start
    assert all(s.end - s.start <= 28.5 for s in segments) and segments[-1].end <= seconds


def test_bad_input_is_a_400_in_openais_shape(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.transcriptions.create(file=("notes.mp3", b"this is not audio " * 100), model="whisper-1")
    assert raised.value.code == "invalid_file" and raised.value.param == "file"
    clip = _eval("asr/en/en_jfk_inaugural_1961.flac")
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.transcriptions.create(file=clip, model="whisper-1", response_format="xml")  # type: ignore[call-overload]
    assert raised.value.param == "response_format"
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.transcriptions.create(file=clip, model="whisper-1", language="xx")
    assert raised.value.param == "language"
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.transcriptions.create(file=clip, model="whisper-1", timestamp_granularities=["word"])
    assert raised.value.param == "timestamp_granularities"  # only with verbose_json, as OpenAI says


def test_word_timestamps_from_the_decoders_alignment(client: OpenAI) -> None:
    file = "asr/en/en_jfk_inaugural_1961.flac"
    result = client.audio.transcriptions.create(
        file=_eval(file),
        model="whisper-1",
        response_format="verbose_json",
        timestamp_granularities=["word"],
        language="en",
    )
    verbose = TranscriptionVerbose.model_validate(result.model_dump())
    assert verbose.segments is None  # only words were asked for
    words = verbose.words or []
    spoken = [w.strip(".,").lower() for w in verbose.text.split()]
    assert [w.word.lower() for w in words] == spoken
    for word in words:
        assert 0.0 <= word.start <= word.end <= verbose.duration
    for before, after in itertools.pairwise(words):
        assert before.start <= after.start and before.end <= after.start + 1e-3
    # "ask not what your country can do for you" is said from about 3 s to 7.3 s.
    asks = [w for w in words if w.word.lower() == "ask"]
    assert len(asks) == 2 and 1.5 < asks[0].start < 3.6 and 7.0 < asks[1].start < 8.3
    assert 9.0 < words[-1].start < 10.5 and words[-1].word.lower() == "country"


def test_a_request_without_a_file_or_not_multipart_is_a_400(files_server: Server) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    url = files_server.http + "/v1/audio/transcriptions"
    no_file = httpx.post(url, files={"model": (None, "whisper-1")}, headers=auth)
    assert no_file.status_code == 400 and no_file.json()["error"]["param"] == "file"
    as_json = httpx.post(url, json={"model": "whisper-1", "file": "x"}, headers=auth)
    assert as_json.status_code == 400
    error = as_json.json()["error"]
    assert error["type"] == "invalid_request_error" and "multipart" in error["message"]


def test_an_upload_past_the_limit_is_a_413(client: OpenAI) -> None:
    audio = np.tile(load_audio(CLIP), 8)  # 70 s of 16-bit wav: 2.2 MB
    data = encode(audio, RATE, "wav")
    assert len(data) > MAX_BYTES
    with pytest.raises(openai.APIStatusError) as raised:
        client.audio.transcriptions.create(file=("big.wav", data), model="whisper-1")
    assert raised.value.status_code == 413
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "file_too_large"


def test_the_route_needs_the_api_key(files_server: Server) -> None:
    clip = _eval("asr/en/en_jfk_inaugural_1961.flac").read_bytes()
    answer = httpx.post(
        files_server.http + "/v1/audio/transcriptions",
        files={"file": ("a.flac", clip)},
        data={"model": "whisper-1"},
        headers={"Authorization": "Bearer wrong"},
    )
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key"


def _eval(file: str) -> Path:
    return EVAL / file


def test_a_client_that_gives_up_stops_its_windows(
    files_server: Server, client: OpenAI, long_file: tuple[bytes, str, float]
) -> None:
    data, _, _ = long_file
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            files_server.http + "/v1/audio/transcriptions",
            files={"file": ("long.flac", data)},
            data={"model": "whisper-1"},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=httpx.Timeout(60.0, read=1.5),
        )
    deadline = time.monotonic() + 30
    while "client disconnected" not in files_server.log_tail(20_000) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "file transcription abandoned" in files_server.log_tail(20_000)
    # The server goes on serving files.
    result = client.audio.transcriptions.create(file=_eval("asr/en/en_jfk_inaugural_1961.flac"), model="m")
    assert "ask not" in result.text.lower()


def test_a_flood_of_files_gets_429_past_the_slots(
    client: OpenAI, long_file: tuple[bytes, str, float]
) -> None:
    data, _, _ = long_file

    def send(_: int) -> str:
        try:
            client.audio.transcriptions.create(file=("long.flac", data), model="whisper-1")
        except openai.RateLimitError as exc:
            assert exc.code == "rate_limit_exceeded" and exc.response.headers["retry-after"]
            return "refused"
        return "served"

    with ThreadPoolExecutor(4) as pool:
        outcomes = sorted(pool.map(send, range(4)))
    # Two slots, no waiting places: the two beyond them are refused, the two in them served.
    assert outcomes == ["refused", "refused", "served", "served"]


def test_a_quiet_speaker_after_a_loud_one_in_the_same_window_is_transcribed(client: OpenAI) -> None:
    """A FLEURS recording about 40 dB below the LibriSpeech one before it, in one 21 s window:
    Whisper reads its window's loudest part as the level of speech, so the quiet one was lost
    until each speech region went in at one level (audio/levels.py)."""
    loud, quiet = "asr/en/en_ls-testclean_1995-1837-0001.wav", "asr/en/en_fleurs_test_002.ogg"
    pause = np.zeros(int(0.6 * RATE), dtype=np.float32)
    audio = np.concatenate([load_audio(loud), pause, load_audio(quiet)])
    result = client.audio.transcriptions.create(
        file=("two.flac", encode(audio, RATE, "flac")), model="whisper-1", language="en"
    )
    assert wer([reference(loud) + " " + reference(quiet)], [result.text]) <= 0.25, result.text
