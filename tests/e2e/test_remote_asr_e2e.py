"""A remote ASR backend, for real: one `dragoman serve` is the ASR node, another transcribes
through its `POST /v1/audio/transcriptions` (`--asr-base-url`), both on loopback.

Real recordings are streamed through the front-end's Realtime transcription session with the
openai SDK, every event validated against the SDK's types: each re-decode step becomes one
request to the node, the stable prefix is kept on the front-end's side, and the transcript is
held to the reference and to the node's own (local) transcript of the same audio. The front's
/health lists the node as reachable. A step whose language is detected among candidates (the
interpreter's auto) gets one of them from the node, though OpenAI's request cannot name them. When the node is gone, a turn fails with a server error that
carries an error id, the session goes on, and /health answers 503 `degraded`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from dragoman.config import load_settings
from dragoman.engines.asr.base import StepRequest, StepResult
from dragoman.engines.asr.openai_transcriptions import BACKEND, OpenAITranscriptions
from harness.realtime_helpers import Transcript, load_audio, read_until, reference, stream, wer
from harness.server import Server, start, stop
from tests.unit.polling import wait_for

pytestmark = pytest.mark.e2e

#: 13 s, one window; 29 s, sealed into windows of at most 10 s (each sealed from word timings
#: the node gives in verbose_json).
CLIPS = ("asr/en/en_ls-devclean_1272-141231-0002.flac", "asr/en/en_ls-devclean_1272-128104-0004_8kHz.wav")
#: English that the node's Whisper base detects as another language (Chinese).
DETECTED_OTHERWISE = "st/en_covost2_st_to_de.flac"
PUSH_TO_TALK: dict[str, Any] = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[tuple[Server, Server]]:
    folder = tmp_path_factory.mktemp("remote-asr")
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription"]
    node = start([*args, "--log-level", "debug"], folder / "node.log", 900.0)
    try:
        # A loaded 2-core machine runs both servers and more: a 20 s window can take the node
        # longer than the default 60 s to transcribe, and a step that times out is a failure.
        config = folder / "front.toml"
        config.write_text("[asr]\ntimeout_s = 180\n")
        front_args = [*args, "--config", str(config), "--asr-base-url", node.http + "/v1"]
        front = start(front_args, folder / "front.log", 900.0)
    except BaseException:
        stop(node)
        raise
    yield node, front
    stop(front)
    stop(node)


def client(server: Server) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.http + "/v1", websocket_base_url=server.ws + "/v1", api_key="sk-local", max_retries=0
    )


def ended(event: dict[str, Any]) -> bool:
    return event["type"] in (
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.failed",
    )


async def transcribe(server: Server, file: str) -> Transcript:
    """One push-to-talk turn, streamed at twice real time so that steps run while it comes."""
    audio = load_audio(file, 24_000)
    async with client(server).realtime.connect(
        model="whisper-base", extra_query={"intent": "transcription"}
    ) as conn:
        transcript = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.session.update(session=PUSH_TO_TALK)  # type: ignore[arg-type]
        await read_until(conn, transcript, lambda e: e["type"] == "session.updated")
        await stream(conn, audio, 24_000, pace=2.0)
        await conn.input_audio_buffer.commit()
        return await read_until(conn, transcript, ended, limit=300.0)


def health(server: Server) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(server.http + "/health", timeout=10)
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


def engines(server: Server) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = health(server)[1]["engines"]
    return found


async def test_the_front_end_transcribes_through_the_node(servers: tuple[Server, Server]) -> None:
    node, front = servers
    asr = [e for e in engines(front) if e.get("role") == "asr"]
    assert asr and asr[0]["backend"] == BACKEND and asr[0]["device"] == "remote", asr
    status, body = health(front)
    [remote] = body["remotes"]
    assert status == 200 and body["status"] == "ok", body
    assert remote["role"] == "asr" and remote["reachable"] and remote["url"] == node.http + "/v1", remote
    assert "remotes" not in health(node)[1], "the node has no remote engine"

    for file in CLIPS:
        requests_before = node.log_tail(2_000_000).count("POST /v1/audio/transcriptions")
        remote = await transcribe(front, file)
        local = await transcribe(node, file)
        steps = node.log_tail(2_000_000).count("POST /v1/audio/transcriptions") - requests_before
        [item] = remote.completed
        [mine] = local.completed
        # Deltas never take back what they sent: the prefix kept on this side held.
        sent = remote.deltas(item["item_id"])
        assert sent and item["transcript"].startswith(sent), (sent, item["transcript"])
        truth = reference(file)
        remote_wer, local_wer = wer([truth], [item["transcript"]]), wer([truth], [mine["transcript"]])
        print(f"{file}: remote WER {remote_wer:.3f}, local WER {local_wer:.3f}, {steps} remote steps")
        # Steps fall where the audio's arrival puts them on a loaded machine, so both transcripts
        # vary from run to run (0.10-0.19 seen for each on the 13 s clip); what is firm is firm
        # sooner here than with a forced prefix, so a little more slack than for the local one.
        assert remote_wer <= max(0.25, local_wer + 0.1), (file, item["transcript"], mine["transcript"])
        # The node served the front-end's steps, one request each (partials and the final).
        assert steps >= 3, steps


def test_the_language_is_detected_among_the_candidates(servers: tuple[Server, Server]) -> None:
    """The interpreter's auto (`StepRequest.detect_among`) through the node: its Whisper base hears
    this 2 s English clip ("She'll be all right.") as Chinese, and OpenAI's request cannot name
    candidates, so the step is asked again in each of them and the likeliest is taken."""
    node, _ = servers
    audio = load_audio(DETECTED_OTHERWISE, 16_000)
    settings = load_settings(None, **{"asr.base_url": node.http + "/v1", "asr.timeout_s": 180}).asr
    engine = OpenAITranscriptions(settings)

    def step(**fields: Any) -> tuple[StepResult, int]:
        before = node.log_tail(2_000_000).count("POST /v1/audio/transcriptions")
        result = engine.transcribe(StepRequest(audio, **fields))
        assert isinstance(result, StepResult), result
        return result, node.log_tail(2_000_000).count("POST /v1/audio/transcriptions") - before

    try:
        anything, requests = step()
        assert anything.language not in (None, "en") and requests == 1, (
            "the clip no longer shows a detection outside the candidates",
            anything,
        )
        among, requests = step(detect_among=("de", "en"))
        assert among.language == "en" and "right" in among.text.lower(), among
        assert requests == 3, "the detection, then once in each candidate"
        # One candidate: no detection, the step is asked in it at once.
        only, requests = step(detect_among=("de",))
        assert only.language == "de" and requests == 1, only
        # A detection among the candidates stands as it is.
        kept, requests = step(detect_among=("en", anything.language))
        assert kept.language == anything.language and requests == 1, kept
    finally:
        engine.close()


async def test_a_turn_fails_with_an_error_id_when_the_node_is_gone(servers: tuple[Server, Server]) -> None:
    node, front = servers
    stop(node)
    transcript = await transcribe(front, CLIPS[0])
    [failed] = transcript.of("conversation.item.input_audio_transcription.failed")
    assert "error id err_" in failed["error"]["message"], failed
    assert "127.0.0.1" not in json.dumps(transcript.events), "no server address reaches the client"
    # The id the client got finds the cause in the server's log.
    error_id = re.findall(r"err_[0-9a-f]+", failed["error"]["message"])[0]
    logged = [line for line in front.log_tail(200_000).splitlines() if error_id in line]
    assert any("asr_server_unavailable" in line for line in logged), logged
    # /health tells a load balancer to send sessions elsewhere (its probe is cached for 5 s).
    await asyncio.to_thread(wait_for, lambda: health(front)[0] != 200, 15.0)
    status, body = health(front)
    assert status == 503 and body["status"] == "degraded", body
    [remote] = body["remotes"]
    assert not remote["reachable"] and remote["reason"].startswith("cannot be reached"), remote
    assert body["engines"], "a degraded server still says what it runs"
