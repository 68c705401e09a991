"""The voice agent over WebRTC (`POST /v1/realtime/calls`) against a real `dragoman serve`.

The caller is an aiortc peer on loopback (harness/webrtc_client.py): its microphone
track speaks real recordings from ../shared/eval at real time, the answer is recorded
from the server's track, and every event on `oai-events` is validated against
`openai.types.realtime` as it arrives. What the answer's track says is sent back through
the same server's transcription endpoint, so the project's own STT judges it. The pool
has one unit, so each test waits for it to be free first.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soxr

pytest.importorskip("aiortc")

from openai import AsyncOpenAI

from dragoman.protocol.realtime.generation import Generation
from harness.realtime_helpers import load_audio, reference, wer
from harness.server import Server, start, stop
from harness.webrtc_client import RATE, Caller, start_for_calls
from tests.e2e.agent_helpers import INTERRUPTION, QUESTION, STORYTELLER, get, in_order, pool_free
from tests.e2e.agent_helpers import transcribe as transcribe_24k
from tests.unit.realtime_sdk import validate

pytestmark = pytest.mark.e2e

#: RMS of a 20 ms frame above which it is sound, not Opus's near-silence.
SOUND = 0.01


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """The agent (and transcription, to hear the answer back) with one pipeline unit; no
    STUN server, as on a machine with no route out: loopback needs none."""
    log = tmp_path_factory.mktemp("webrtc") / "dragoman.log"
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "agent", "transcription"]
    running = start_for_calls([*args, "--num-pipelines", "1"], log)
    yield running
    stop(running)


def check(event: dict[str, Any]) -> None:
    validate(event, Generation.GA)


async def connected(server: Server, **session: Any) -> Caller:
    """A call whose data channel is open (its `session.created` in), updated with `session`."""
    await pool_free(server)
    caller = Caller(server.http, validate=check)
    response = await caller.call()
    assert response.status_code == 201, response.text
    assert response.headers["content-type"].startswith("application/sdp")
    assert response.headers["location"].startswith("/v1/realtime/calls/rtc_")
    created = await caller.until(lambda e: e["type"] == "session.created", 60)
    assert caller.events[0] is created, "session.created is the first event on the data channel"
    if session:
        caller.send({"type": "session.update", "session": {"type": "realtime", **session}})
        updated = await caller.until(lambda e: e["type"] in ("session.updated", "error"))
        assert updated["type"] == "session.updated", updated
    return caller


def speech(file: str) -> np.ndarray:
    return load_audio(file, RATE)


def sound_seconds(audio: np.ndarray) -> float:
    frames = audio[: len(audio) // 960 * 960].reshape(-1, 960)
    return float((np.sqrt(np.mean(np.square(frames), axis=1)) > SOUND).sum() * 0.02)


async def ask_for_a_story(caller: Caller) -> dict[str, Any]:
    """A long spoken answer, playing: its `output_audio_buffer.started`."""
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Tell a long story."}],
    }
    caller.send({"type": "conversation.item.create", "item": item})
    caller.send({"type": "response.create"})
    started = await caller.until(lambda e: e["type"] == "output_audio_buffer.started", 180)
    await asyncio.sleep(1.0)  # some of it heard
    return started


# -- a spoken turn -------------------------------------------------------------------------


async def test_a_spoken_question_is_answered_on_the_track_in_the_protocols_order(server: Server) -> None:
    caller = await connected(server)
    try:
        caller.microphone.say(speech(QUESTION))
        done = await caller.until(lambda e: e["type"] == "response.done", 240)
        stopped = await caller.until(lambda e: e["type"] == "output_audio_buffer.stopped", 120)
        await asyncio.sleep(0.3)  # the last frames in flight
    finally:
        status = await caller.hang_up()
        await caller.close()
    order = caller.kinds()
    assert in_order(
        order,
        "session.created",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed",
        "response.created",
        "response.content_part.added",
        "output_audio_buffer.started",
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.done",
        "output_audio_buffer.stopped",
    ), order
    assert "response.output_audio.delta" not in order, "over WebRTC the audio is on the track"
    assert done["response"]["status"] == "completed"
    assert stopped["response_id"] == done["response"]["id"]
    (started,) = caller.of("output_audio_buffer.started")
    assert started["response_id"] == done["response"]["id"]
    (heard,) = caller.of("conversation.item.input_audio_transcription.completed")
    assert wer([reference(QUESTION)], [heard["transcript"]]) < 0.3, heard["transcript"]
    # The track carried the answer: sound, as long as speech of it takes, that says its transcript.
    answer = caller.audio_between(caller.time_of(started), caller.time_of(stopped) + 0.3)
    (final,) = caller.of("response.output_audio_transcript.done")
    words = len(final["transcript"].split())
    assert sound_seconds(answer) > 0.15 * words, (sound_seconds(answer), final["transcript"])
    heard_back = await transcribe_24k(server, soxr.resample(answer, RATE, 24_000).astype(np.float32))
    assert wer([final["transcript"]], [heard_back]) < 0.4, (final["transcript"], heard_back)
    assert status == 204
    assert get(server, "/v1/pool")["idle"] == 1, "the hang-up let the unit go"


# -- WebRTC's differences from WebSocket ---------------------------------------------------


async def test_append_is_refused_for_the_transport(server: Server) -> None:
    caller = await connected(server)
    try:
        caller.send({"type": "input_audio_buffer.append", "audio": "AAAA", "event_id": "evt_append"})
        error = await caller.until(lambda e: e["type"] == "error", 30)
    finally:
        await caller.hang_up()
        await caller.close()
    assert error["error"]["code"] == "invalid_event_for_transport"
    assert error["error"]["event_id"] == "evt_append"


async def test_output_audio_buffer_clear_stops_the_answer_on_the_track(server: Server) -> None:
    caller = await connected(server, instructions=STORYTELLER)
    try:
        started = await ask_for_a_story(caller)
        before = caller.audio_between(caller.time_of(started))
        caller.send({"type": "output_audio_buffer.clear"})
        cleared = await caller.until(lambda e: e["type"] == "output_audio_buffer.cleared", 30)
        at = caller.time_of(cleared)
        await asyncio.sleep(2.5)
    finally:
        await caller.hang_up()
        await caller.close()
    assert cleared["response_id"] == started["response_id"]
    assert sound_seconds(before) > 0.3, "the answer was heard before the clear"
    after = caller.audio_between(at + 0.5)
    assert len(after) > RATE, "the track went on (with silence)"
    assert sound_seconds(after) == 0, "no more of the answer after the clear"
    (done,) = [e for e in caller.of("response.done") if e["response"]["id"] == started["response_id"]]
    if done["response"]["status"] == "cancelled":  # still generating at the clear
        assert done["response"]["status_details"]["reason"] == "client_cancelled"
    assert not caller.of("output_audio_buffer.stopped"), "a cleared answer is not also stopped"


async def test_a_barge_in_over_the_track_flushes_the_answer(server: Server) -> None:
    caller = await connected(server, instructions=STORYTELLER)
    try:
        started = await ask_for_a_story(caller)
        caller.microphone.say(speech(INTERRUPTION))
        speaking = await caller.until(lambda e: e["type"] == "input_audio_buffer.speech_started", 60)
        cleared = await caller.until(lambda e: e["type"] == "output_audio_buffer.cleared", 30)
        # The server truncates the answer to what was played, as OpenAI does over WebRTC.
        truncated = await caller.until(lambda e: e["type"] == "conversation.item.truncated", 30)
        caller.send({"type": "conversation.item.retrieve", "item_id": truncated["item_id"]})
        retrieved = await caller.until(lambda e: e["type"] == "conversation.item.retrieved", 30)
        await caller.microphone.quiet()
    finally:
        await caller.hang_up()
        await caller.close()
    assert cleared["response_id"] == started["response_id"]
    heard = str(retrieved["item"]["content"][0]["transcript"])
    said = "".join(
        e["delta"]
        for e in caller.of("response.output_audio_transcript.delta")
        if e["response_id"] == started["response_id"]
    )
    assert heard and said.startswith(heard), (heard, said)
    # What was played, not what was made: no more than the time the answer was playing.
    playing_ms = 1000 * (caller.time_of(cleared) - caller.time_of(started))
    assert 0 < truncated["audio_end_ms"] <= playing_ms + 100, (truncated, playing_ms)
    kinds = caller.kinds()
    assert kinds.index("input_audio_buffer.speech_started") < kinds.index("output_audio_buffer.cleared")
    first = next(e for e in caller.of("response.done") if e["response"]["id"] == started["response_id"])
    if first["response"]["status"] == "cancelled":  # still generating when the user spoke
        assert first["response"]["status_details"]["reason"] == "turn_detected"
        assert caller.events.index(first) < caller.events.index(speaking)
    # Silence from the flush to the end of the interruption (the next answer comes after it).
    next_start = [e for e in caller.of("output_audio_buffer.started") if e is not started]
    end = caller.time_of(next_start[0]) if next_start else float("inf")
    window = caller.audio_between(caller.time_of(cleared) + 0.5, end)
    assert len(window) > RATE // 2 and sound_seconds(window) == 0


# -- setting up and ending calls -----------------------------------------------------------


async def test_the_pool_limit_refuses_a_second_call_with_503(server: Server) -> None:
    caller = await connected(server)
    second = Caller(server.http)
    try:
        assert get(server, "/v1/pool")["busy"] == 1
        refused = await second.call()
    finally:
        await second.close()
        await caller.hang_up()
        await caller.close()
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "session_limit_reached" and error["type"] == "server_error"
    assert get(server, "/v1/usage")["counters"]["sessions_refused"] >= 1


async def test_a_closed_peer_connection_ends_the_call(server: Server) -> None:
    caller = await connected(server)
    location = caller.location
    await caller.close()  # no DELETE: the peer just goes away
    await pool_free(server)
    gone = Caller(server.http)
    gone.location = location
    assert await gone.hang_up() == 404, "the call is over"


async def test_the_sdks_multipart_form_carries_the_session(server: Server) -> None:
    await pool_free(server)
    caller = Caller(server.http, validate=check)
    sdk = AsyncOpenAI(base_url=server.http + "/v1", api_key="sk-local", max_retries=0)
    offer = await caller.offer()
    session = {
        "type": "realtime",
        "instructions": "You are Zorblat.",
        "audio": {"output": {"voice": "alloy"}},
    }
    try:
        raw = await sdk.realtime.calls.with_raw_response.create(sdp=offer, session=session)  # type: ignore[arg-type]
        assert raw.status_code == 201
        await caller.answer(raw.text, raw.headers["location"])
        created = await caller.until(lambda e: e["type"] == "session.created", 60)
    finally:
        if caller.location is not None:
            await caller.hang_up()
        await caller.close()
    assert created["session"]["instructions"] == "You are Zorblat."
    assert [e["type"] for e in caller.events].count("session.updated") == 0, "applied before created"


async def test_an_ephemeral_keys_session_is_the_calls_and_the_key_works_once(server: Server) -> None:
    await pool_free(server)
    sdk = AsyncOpenAI(base_url=server.http + "/v1", api_key="sk-local", max_retries=0)
    secret = await sdk.realtime.client_secrets.create(
        session={"type": "realtime", "instructions": "You are Quux, bound to the key."}
    )
    assert secret.value.startswith("ek_")
    caller = Caller(server.http, api_key=secret.value, validate=check)
    again = Caller(server.http, api_key=secret.value)
    try:
        assert (await caller.call()).status_code == 201
        created = await caller.until(lambda e: e["type"] == "session.created", 60)
        refused = await again.call()
    finally:
        await again.close()
        await caller.close()  # the spent key cannot DELETE the call: the closed peer ends it
    assert created["session"]["instructions"] == "You are Quux, bound to the key."
    assert refused.status_code == 401, "an ephemeral key opens one session"


async def test_an_expired_ephemeral_key_is_refused(server: Server) -> None:
    sdk = AsyncOpenAI(base_url=server.http + "/v1", api_key="sk-local", max_retries=0)
    secret = await sdk.realtime.client_secrets.create(expires_after={"anchor": "created_at", "seconds": 10})
    await asyncio.sleep(11.5)
    caller = Caller(server.http, api_key=secret.value)
    try:
        refused = await caller.call()
    finally:
        await caller.close()
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "invalid_request_error"


async def test_a_bad_offer_is_refused_with_400(server: Server) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            server.http + "/v1/realtime/calls", content="hello", headers={"Content-Type": "application/sdp"}
        )
        json_body = await client.post(
            server.http + "/v1/realtime/calls",
            content=json.dumps({}),
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 400 and response.json()["error"]["param"] == "sdp"
    assert json_body.status_code == 400
    assert get(server, "/v1/pool")["busy"] == 0


async def test_sigterm_tells_the_caller_and_ends_the_call(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAGOMAN_ICE_SERVERS", "[]")
    own = start(
        ["serve", "--cache-dir", str(cache_dir), "--services", "agent"], tmp_path / "dragoman.log", 600
    )
    caller = Caller(own.http, validate=check)
    try:
        assert (await caller.call()).status_code == 201
        await caller.until(lambda e: e["type"] == "session.created", 60)
        own.process.send_signal(signal.SIGTERM)
        error = await caller.until(lambda e: e["type"] == "error", 30)
        assert error["error"]["code"] == "server_shutting_down"
        # uvicorn re-raises the signal once it has shut down, as a process killed by it exits.
        assert await asyncio.to_thread(own.process.wait, 30) in (0, -signal.SIGTERM)
        assert "call closed" in own.log.read_text(), "the call was ended, not left behind"
    finally:
        await caller.close()
        stop(own)
