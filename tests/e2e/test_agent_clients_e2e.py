"""The flows voice frameworks run against `/v1/realtime`, end to end with the openai SDK (issue 24).

A real `dragoman serve`, the openai SDK as the client, every server event validated against
`openai.types.realtime` as it arrives (`read_until`). The flows are those of LiveKit Agents,
pipecat and OpenAI's Agents SDK (docs/compatibility.md): push-to-talk, `response.create`
with metadata, out-of-band responses with their own input, audio re-sent as an
`input_audio` item, G.711 telephony audio, and a reconnect right after a close.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest
import soxr

from dragoman.audio import g711
from dragoman.audio.pcm import float_to_pcm16
from harness.realtime_helpers import Transcript, b64, load_audio, read_until, reference, stream, wer
from harness.server import Server
from tests.e2e.agent_helpers import (
    QUESTION,
    RATE,
    agent,
    client,
    kinds,
    pool_free,
    response_done,
    transcribe,
)

pytestmark = pytest.mark.e2e

PUSH_TO_TALK = {"audio": {"input": {"turn_detection": None, "transcription": {"model": "whisper-base"}}}}


def user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def test_push_to_talk_answers_the_committed_turn(server: Server) -> None:
    """Commit, then at once response.create (the Agents SDK, LiveKit and pipecat alike)."""
    async with agent(server, **PUSH_TO_TALK) as (conn, log):
        await stream(conn, load_audio(QUESTION, RATE), RATE, piece_seconds=0.2)
        await conn.input_audio_buffer.commit()
        await conn.response.create()
        await read_until(conn, log, response_done, limit=180)
    order = kinds(log)
    assert "error" not in order, log.errors()
    (heard,) = log.completed
    assert wer([reference(QUESTION)], [heard["transcript"]]) < 0.3
    assert order.index("conversation.item.input_audio_transcription.completed") < order.index(
        "response.created"
    )
    (done,) = log.of("response.done")
    assert done["response"]["status"] == "completed", done
    assert log.of("response.output_audio_transcript.done")[-1]["transcript"].strip()
    (item_done,) = [e for e in log.of("conversation.item.done") if e["item"]["id"] == heard["item_id"]]
    assert item_done["item"]["content"][0]["transcript"] == heard["transcript"]


async def test_metadata_is_echoed_and_usage_has_its_details(server: Server) -> None:
    """LiveKit's generate_reply() waits for its client_event_id in response.created."""
    async with agent(server) as (conn, log):
        await conn.conversation.item.create(item=user_text("Say hello."))
        await conn.response.create(
            response={"output_modalities": ["text"], "metadata": {"client_event_id": "evt_livekit_1"}}
        )
        await read_until(conn, log, response_done, limit=120)
    (created,) = log.of("response.created")
    (done,) = log.of("response.done")
    assert created["response"]["metadata"] == {"client_event_id": "evt_livekit_1"}
    assert done["response"]["metadata"] == {"client_event_id": "evt_livekit_1"}
    usage = done["response"]["usage"]
    assert usage["input_tokens"] > 0 and usage["input_token_details"]["text_tokens"] == usage["input_tokens"]
    assert usage["output_token_details"]["text_tokens"] == usage["output_tokens"] > 0
    assert usage["input_token_details"]["cached_tokens"] >= 0


async def test_an_out_of_band_response_with_its_own_input(server: Server) -> None:
    async with agent(server) as (conn, log):
        await conn.conversation.item.create(item=user_text("I would like to return these shoes."))
        await read_until(conn, log, lambda e: e["type"] == "conversation.item.done")
        item_id = log.of("conversation.item.added")[0]["item"]["id"]
        await conn.response.create(
            response={
                "conversation": "none",
                "output_modalities": ["text"],
                "instructions": "Answer with one word: the customer's intent (refund, order or other).",
                "input": [{"type": "item_reference", "id": item_id}],
                "metadata": {"purpose": "classify"},
            }
        )
        await read_until(conn, log, response_done, limit=120)
        (done,) = log.of("response.done")
        output_id = done["response"]["output"][0]["id"]
        # Out of band: its output is not in the conversation.
        await conn.conversation.item.retrieve(item_id=output_id)
        await read_until(conn, log, lambda e: e["type"] in ("error", "conversation.item.retrieved"))
    assert done["response"]["status"] == "completed" and done["response"]["metadata"] == {
        "purpose": "classify"
    }
    assert done["response"]["output"][0]["content"][0]["text"].strip()
    added = [e["item"]["id"] for e in log.of("conversation.item.added")]
    assert added == [item_id], "the response's items stayed out of the conversation"
    assert log.errors()[-1]["param"] == "item_id"


async def test_an_input_audio_item_is_transcribed(server: Server) -> None:
    """The Agents SDK's updateHistory() re-sends the user's audio as input_audio."""
    audio = load_audio(QUESTION, RATE)
    async with agent(server) as (conn, log):
        item = {"type": "message", "role": "user", "content": [{"type": "input_audio", "audio": b64(audio)}]}
        await conn.conversation.item.create(item=item)
        await read_until(conn, log, lambda e: e["type"] == "conversation.item.done", limit=120)
    assert kinds(log)[1:] == [
        "conversation.item.added",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.done",
    ]
    transcript = log.of("conversation.item.done")[0]["item"]["content"][0]["transcript"]
    assert wer([reference(QUESTION)], [transcript]) < 0.3, transcript
    assert "response.created" not in kinds(log), "an item is never answered by itself"


async def test_g711_mu_law_both_ways(server: Server) -> None:
    """A telephony client (Twilio, SIP): 8 kHz mu-law in, mu-law out."""
    question = load_audio(QUESTION, 8000)
    formats = {"input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcmu"}}}
    async with agent(server, audio=formats) as (conn, log):
        assert log.of("session.updated")[-1]["session"]["audio"]["output"]["format"] == {"type": "audio/pcmu"}
        mu = g711.from_pcm16(float_to_pcm16(np.concatenate([question, np.zeros(int(1.2 * 8000))])), "pcmu")
        for start in range(0, len(mu), 1600):  # 200 ms appends
            await conn.input_audio_buffer.append(audio=base64.b64encode(mu[start : start + 1600]).decode())
        await read_until(conn, log, response_done, limit=180)
    (heard,) = log.completed
    assert wer([reference(QUESTION)], [heard["transcript"]]) < 0.35, heard["transcript"]
    (done,) = log.of("response.done")
    answer = b"".join(
        base64.b64decode(e["delta"])
        for e in log.of("response.output_audio.delta")
        if e["response_id"] == done["response"]["id"]
    )
    pcm = g711.decode(answer, "pcmu").astype(np.float32) / 32768.0
    said = log.of("response.output_audio_transcript.done")[-1]["transcript"]
    heard_back = await transcribe(server, soxr.resample(pcm, 8000, RATE).astype(np.float32))
    assert wer([said], [heard_back]) < 0.5, (said, heard_back)


async def test_a_reconnect_right_after_a_close_is_admitted(server: Server) -> None:
    """A page reload or a framework's reconnect: the pool's one unit is still draining."""
    await pool_free(server)
    for _ in range(3):
        async with client(server).realtime.connect(model="dragoman-agent") as conn:
            log = await read_until(conn, Transcript(), lambda e: e["type"] in ("session.created", "error"))
            assert kinds(log) == ["session.created"], log.errors()
