"""The interpreter over WebRTC (`POST /v1/realtime/translations/calls`) against a real
`dragoman serve`, the way OpenAI's "Realtime translation" guide has a browser do it.

The caller (harness/webrtc_client.py, aiortc on loopback) mints an ephemeral key bound to
the translation session with the openai SDK, opens `oai-events`, POSTs its offer with the
key, and speaks a real English FLEURS clip (../shared/eval/speech_translation.tsv) into its
microphone track at real time. The translated speech is recorded from the server's track,
and every data-channel event is validated against the SDK's
`RealtimeTranslationServerEvent`. The German is scored as test_translation_e2e scores it:
chrF against FLORES, next to the same server's text MT of the gold transcript. The
expired-key tests cover both transports: a key past its `expires_at` opens nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("aiortc")

import websockets

from harness.realtime_helpers import load_audio, wer
from harness.server import Server, stop
from harness.webrtc_client import RATE, Caller, start_for_calls
from tests.e2e.test_translation_e2e import assert_translates, client, clip, validate

pytestmark = pytest.mark.e2e

CALLS = "/v1/realtime/translations/calls"
#: RMS of a 20 ms frame above which it is sound, not Opus's near-silence.
SOUND = 0.01


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """The interpreter, and MT protocol v1 for the text MT the speech is scored against."""
    log = tmp_path_factory.mktemp("translation-webrtc") / "dragoman.log"
    running = start_for_calls(
        ["serve", "--cache-dir", str(cache_dir), "--services", "interpreter", "mt"], log
    )
    yield running
    stop(running)


async def mint(server: Server, audio: Any, seconds: int = 600) -> str:
    async with client(server) as sdk:  # closed in this event loop, not by the GC after it
        secret = await sdk.realtime.translations.client_secrets.create(
            session={"model": "gpt-realtime-translate", "audio": audio},
            expires_after={"anchor": "created_at", "seconds": seconds},
        )
    return secret.value


async def test_english_spoken_into_the_call_comes_back_german_on_the_track_and_the_channel(
    server: Server,
) -> None:
    row = clip(3)
    key = await mint(server, {"output": {"language": "de"}, "input": {"transcription": {"model": "whisper"}}})
    caller = Caller(server.http, api_key=key, validate=validate)
    try:
        answered = await caller.call(CALLS)
        assert answered.status_code == 201, answered.text
        assert answered.headers["content-type"].startswith("application/sdp")
        assert answered.headers["location"].startswith(CALLS + "/rtc_")
        created = await caller.until(lambda e: e["type"] == "session.created", 60)
        assert caller.events[0] is created, "session.created is the first event on the data channel"
        assert created["session"]["audio"]["output"]["language"] == "de", "the key's binding applies"
        # The source audio is the track's: an append on the data channel is refused, and the call goes on.
        caller.send({"type": "session.input_audio_buffer.append", "audio": "AAAA", "event_id": "dc"})
        refused = await caller.until(lambda e: e["type"] == "error", 30)
        assert refused["error"]["code"] == "invalid_event_for_transport", refused
        assert refused["error"]["event_id"] == "dc"

        speech = load_audio(row["file"], RATE)
        # A browser's microphone track has autoGainControl on by default. This FLEURS clip
        # peaks at -46 dBFS, where Opus's coding noise kept Silero under its threshold for the
        # first second of speech (found at 1.4 s, not 0.5 s as over the WebSocket), and the
        # words before it never reached the segment: brought to a speaking level.
        speech *= 0.5 / float(np.abs(speech).max())
        caller.microphone.say(np.concatenate([speech, np.zeros(RATE // 5, dtype=np.float32)]))
        await caller.microphone.quiet()
        began = caller.microphone.began[0]
        caller.send({"type": "session.close"})
        await caller.until(lambda e: e["type"] == "session.closed", 300)
        # The call plays out the rest of the translation, then hangs up: the track ends.
        await caller.track_ended(90)
    finally:
        await caller.close()

    kinds = caller.kinds()
    assert kinds.count("error") == 1, [e for e in caller.events if e["type"] == "error"]
    assert "session.output_audio.delta" not in kinds, "the speech is on the track, not the data channel"
    assert kinds[-1] == "session.closed"
    stamped = [e["elapsed_ms"] for e in caller.events if "elapsed_ms" in e]
    assert stamped and all(ms % 200 == 0 for ms in stamped)

    source = "".join(e["delta"] for e in caller.of("session.input_transcript.delta"))
    assert wer([row["src_text"]], [source]) < 0.6, source
    german = "".join(e["delta"] for e in caller.of("session.output_transcript.delta"))
    await assert_translates(server, row, source, german)

    # The translation is heard on the track: seconds of sound after the English began.
    loud = [h for h in caller.heard if h.at > began and h.rms > SOUND]
    assert len(loud) * 0.02 > 1.5, f"{len(loud) * 0.02:.2f} s of sound on the track"
    first_text = caller.time_of(caller.of("session.output_transcript.delta")[0])
    assert loud[-1].at > first_text, "the speech follows its text"


async def test_a_call_without_a_known_model_is_refused(server: Server) -> None:
    for query, code in (("", "missing_model"), ("?model=gpt-4o-realtime-preview", "model_not_found")):
        caller = Caller(server.http)
        try:
            refused = await caller.call(CALLS + query)
        finally:
            await caller.close()
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == code, error


async def test_an_expired_translation_key_opens_neither_a_call_nor_a_websocket(server: Server) -> None:
    keys = [await mint(server, {"output": {"language": "it"}}, seconds=10) for _ in range(2)]
    await asyncio.sleep(11.5)
    caller = Caller(server.http, api_key=keys[0])
    try:
        refused = await caller.call(CALLS)
    finally:
        await caller.close()
    assert refused.status_code == 401
    error = refused.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "invalid_api_key",
        None,
    )
    with pytest.raises(websockets.InvalidStatus) as closed:
        async with (
            client(server, keys[1]) as sdk,
            sdk.realtime.translations.connect(model="gpt-realtime-translate"),
        ):
            pass
    assert closed.value.response.status_code == 401


async def test_delete_on_the_location_hangs_up(server: Server) -> None:
    caller = Caller(server.http, validate=validate)
    try:
        answered = await caller.call(CALLS + "?model=dragoman-interpreter")
        assert answered.status_code == 201, answered.text
        created = await caller.until(lambda e: e["type"] == "session.created", 60)
        assert created["session"]["model"] == "dragoman-interpreter"
        assert await caller.hang_up() == 204
        await caller.track_ended(30)
        assert await caller.hang_up() == 404, "the call is over"
    finally:
        await caller.close()
