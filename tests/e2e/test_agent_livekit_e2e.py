"""LiveKit Agents' OpenAI `RealtimeModel`, replayed frame by frame against a real `dragoman serve`.

LiveKit's session runs inside a LiveKit room worker, so this replays what its
`livekit-plugins-openai` realtime session sends (read from its source,
`livekit/plugins/openai/realtime/realtime_model.py` and `utils.py`):

- on connect, `session.update` with its defaults: `semantic_vad` (eagerness medium),
  `gpt-4o-mini-transcribe`, voice `marin`, `max_output_tokens: "inf"`, and `tracing`;
- `update_chat_ctx()` (an agent handoff, a restored context): each missing item as
  `conversation.item.create` after the one before it (`previous_item_id`, "root" for the
  first), function calls included, their call ids cut to 32 characters by hashing;
- `generate_reply()`: `response.create` whose `response.metadata.client_event_id` is the
  event's own id; it waits 10 s for a `response.created` carrying that id, else the reply fails.

Every event is validated against the openai SDK's types as it arrives (`read_until`).
"""

from __future__ import annotations

import hashlib
import uuid

import pytest

from tests.e2e.realtime_helpers import Transcript, read_until
from tests.e2e.server import Server
from tests.e2e.test_agent_e2e import client, kinds, pool_free, response_done

pytestmark = pytest.mark.e2e

#: LiveKit's session.update on connect (its defaults, GA shape).
SESSION = {
    "type": "realtime",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "noise_reduction": None,
            "transcription": {"model": "gpt-4o-mini-transcribe"},
            "turn_detection": {
                "type": "semantic_vad",
                "create_response": True,
                "eagerness": "medium",
                "interrupt_response": True,
            },
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "speed": 1.0, "voice": "marin"},
    },
    "max_output_tokens": "inf",
    "tool_choice": "auto",
    "tracing": None,
    "instructions": "You are a helpful assistant. Answer in one short sentence.",
}


def short_call_id(call_id: str) -> str:
    """LiveKit's `_shorten_call_id`: OpenAI caps call ids at 32 characters."""
    return call_id if len(call_id) <= 32 else hashlib.sha256(call_id.encode()).hexdigest()[:32]


async def test_livekit_connect_restore_context_and_generate_reply(server: Server) -> None:
    await pool_free(server)
    upstream_call = "toolu_" + "a1b2c3d4" * 6  # another LLM's id, longer than 32 characters
    history = [
        {
            "id": "item_lk_user",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "What's the weather in Oslo?"}],
        },
        {
            "id": "item_lk_call",
            "type": "function_call",
            "call_id": short_call_id(upstream_call),
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {
            "id": "item_lk_output",
            "type": "function_call_output",
            "call_id": short_call_id(upstream_call),
            "output": '{"sky": "snow", "celsius": -3}',
        },
    ]
    async with client(server).realtime.connect(model="gpt-realtime") as conn:
        log = await read_until(conn, Transcript(), lambda e: e["type"] == "session.created")
        await conn.send(
            {
                "type": "session.update",
                "event_id": "session_update_" + uuid.uuid4().hex[:12],
                "session": SESSION,
            }
        )
        await read_until(conn, log, lambda e: e["type"] in ("session.updated", "error"))
        previous = "root"
        for item in history:
            await conn.send(
                {
                    "type": "conversation.item.create",
                    "event_id": "chat_ctx_create_" + uuid.uuid4().hex[:12],
                    "previous_item_id": previous,
                    "item": item,
                }
            )
            previous = item["id"]
        for _ in history:
            await read_until(conn, log, lambda e: e["type"] in ("conversation.item.done", "error"))
        event_id = "response_create_" + uuid.uuid4().hex[:12]
        await conn.send(
            {
                "type": "response.create",
                "event_id": event_id,
                "response": {
                    "instructions": SESSION["instructions"],
                    "metadata": {"client_event_id": event_id},
                },
            }
        )
        # LiveKit gives up on the reply after 10 s without its response.created, which comes with
        # the first audio here: how soon is a benchmark's matter (bench/), not this test's.
        created = await read_until(conn, log, lambda e: e["type"] in ("response.created", "error"), limit=120)
        await read_until(conn, log, response_done, limit=120)
    assert log.errors() == [], log.errors()
    session = log.of("session.updated")[-1]["session"]
    assert session["audio"]["input"]["turn_detection"]["type"] == "semantic_vad"
    added = [e for e in log.of("conversation.item.added")]
    assert [e["item"]["id"] for e in added[:3]] == ["item_lk_user", "item_lk_call", "item_lk_output"]
    assert [e["previous_item_id"] for e in added[:3]] == [None, "item_lk_user", "item_lk_call"]
    assert created.events[-1]["response"]["metadata"] == {"client_event_id": event_id}
    (done,) = log.of("response.done")
    assert done["response"]["status"] == "completed" and done["response"]["metadata"] == {
        "client_event_id": event_id
    }
    said = log.of("response.output_audio_transcript.done")[-1]["transcript"].lower()
    assert said.strip(), kinds(log)
