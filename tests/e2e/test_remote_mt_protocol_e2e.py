"""MT on a node over MT protocol v1, for real: a `dragoman serve --services mt` node runs the
packaged 0.5B with AlignAtt, and a front-end `dragoman serve --services mt interpreter
--mt-node ws://node/v1/mt` has no MT model of its own.

- `/v1/mt` through the front gives what the node gives directly: the same FLORES sentences,
  fed word by word with the same updates to both, commit the same text (the node's policy and
  attention decide, the front relays), and the finals match by chrF; the time to each answer
  is printed for both.
- The interpreter on the front translates a FLEURS clip driven by the openai SDK, every event
  validated, about as well as the node's text MT of the gold transcript.
- With the node gone, a draft fails with an error id that finds `mt_node_unavailable` in the
  front's log, `/health` answers 503 `degraded`, and `/v1/audio/speech`, which needs no MT,
  still speaks.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import sacrebleu
from websockets.sync.client import ClientConnection

from dragoman.engines.mt.mt_protocol_remote import BACKEND
from harness.realtime_helpers import load_audio, wer
from harness.server import Server, start, stop
from tests.e2e.mt_fixtures import flores
from tests.e2e.remote_mt import MIN_CHRF, SENTENCES, check_draft_fails, check_remote_health, mt_session
from tests.e2e.test_translation_e2e import RATE, Heard, client, clip, read, stream, text_mt

pytestmark = pytest.mark.e2e

#: The front's finals against the node's own: the same model, policy and updates; greedy
#: decoding, so the text is the node's (chrF 100) unless a cache makes a float differ.
MIN_CHRF_TO_NODE = 90.0


@dataclass
class Fleet:
    node: Server
    front: Server


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Fleet]:
    logs = tmp_path_factory.mktemp("mt-nodes")
    cache = ["--cache-dir", str(cache_dir)]
    node_args = ["serve", *cache, "--services", "mt", "--preset", "fast", "--max-sessions", "8"]
    node = start(node_args, logs / "node.log", timeout=600.0)
    try:
        front_args = ["serve", *cache, "--services", "mt", "interpreter", "--mt-node", node.ws + "/v1/mt"]
        front = start(front_args, logs / "front.log", timeout=600.0)
    except BaseException:
        stop(node)
        raise
    yield Fleet(node, front)
    stop(front)
    stop(node)


def test_health_names_the_nodes_and_their_reachability(fleet: Fleet) -> None:
    check_remote_health(fleet.front, BACKEND)


def feed(
    ws: ClientConnection, utterance: int, sentence: str, seq: int, start_ms: float
) -> tuple[list[Any], int]:
    """Feed `sentence` word by word from `start_ms` (two words of unstable tail), waiting for each
    answer (so nothing is coalesced and both paths see the same updates), then its final.
    Every reply with the seconds it took, and the last seq."""
    words = sentence.split()
    timed = [[word, start_ms + 400.0 * i, start_ms + 400.0 * i + 300.0] for i, word in enumerate(words)]
    replies: list[tuple[dict[str, Any], float]] = []
    for end in range(1, len(words) + 1):
        seq += 1
        update = {"type": "update", "seq": seq, "utterance_id": utterance, "words": timed[:end]}
        tail = {"words": [[word, None, None] for word in words[end : end + 2]]}
        began = time.perf_counter()
        ws.send(json.dumps(update | {"tail": tail, "clock_ms": start_ms + 400.0 * end + 100.0}))
        replies.append((json.loads(ws.recv(timeout=180)), time.perf_counter() - began))
    seq += 1
    final = {"type": "update", "seq": seq, "utterance_id": utterance, "words": timed, "is_final": True}
    began = time.perf_counter()
    ws.send(json.dumps(final | {"clock_ms": start_ms + 400.0 * len(words) + 500.0}))
    replies.append((json.loads(ws.recv(timeout=180)), time.perf_counter() - began))
    return replies, seq


def session(url: str, pairs: list[tuple[str, str]]) -> list[tuple[dict[str, Any], float]]:
    with mt_session(url) as ws:
        seq, out = 0, []
        for utterance, (english, _) in enumerate(pairs):
            replies, seq = feed(ws, utterance, english, seq, start_ms=60_000.0 * utterance)
            out += replies
    return out


def test_v1_mt_through_the_front_is_what_the_node_gives(fleet: Fleet) -> None:
    pairs = flores(SENTENCES)
    direct = session(fleet.node.ws + "/v1/mt", pairs)
    relayed = session(fleet.front.ws + "/v1/mt", pairs)
    frames = [frame for frame, _ in relayed]
    assert all(frame["type"] == "translation" for frame in frames), frames
    for utterance in range(len(pairs)):
        texts = [f["committed_text"] for f in frames if f["utterance_id"] == utterance]
        assert all(b.startswith(a) for a, b in pairwise(texts)), texts  # append-only
    partial = [f for f in frames if not f["final"]]
    # The node's AlignAtt decided each commit, not a policy of the front's.
    assert all(f["stop_reason"].startswith("alignatt:") for f in partial), partial
    assert any(f["committed_text"] and f["covered_source_units"] for f in partial), partial

    node_finals = [f["committed_text"] for f, _ in direct if f["final"]]
    finals = [f["committed_text"] for f in frames if f["final"]]
    same = sum(
        a["committed_text"] == b["committed_text"] for (a, _), (b, _) in zip(direct, relayed, strict=True)
    )
    to_node = sacrebleu.corpus_chrf(finals, [node_finals]).score
    to_flores = sacrebleu.corpus_chrf(finals, [[german for _, german in pairs]]).score
    lag = {name: [s for _, s in run] for name, run in (("node", direct), ("front", relayed))}
    print(f"finals: {finals}\nnode:   {node_finals}")
    print(
        f"chrF to the node's finals {to_node:.1f}, to FLORES {to_flores:.1f}; {same}/{len(frames)} "
        f"answers the same; answer p50 node {statistics.median(lag['node']) * 1000:.0f} ms, "
        f"front {statistics.median(lag['front']) * 1000:.0f} ms"
    )
    assert to_node >= MIN_CHRF_TO_NODE, (finals, node_finals)
    assert to_flores >= MIN_CHRF, finals


async def test_the_interpreter_translates_through_the_node(fleet: Fleet) -> None:
    row = clip(3)
    audio = np.concatenate([load_audio(row["file"], RATE), np.zeros(int(RATE * 0.3), dtype=np.float32)])
    heard = Heard()
    async with client(fleet.front).realtime.translations.connect(model="gpt-realtime-translate") as conn:
        await read(conn, heard, lambda e: e["type"] == "session.created", 30)
        # The source transcript comes only when asked for.
        await conn.session.update(
            session={
                "audio": {"output": {"language": "de"}, "input": {"transcription": {"model": "whisper"}}}
            }
        )
        await read(conn, heard, lambda e: e["type"] in ("session.updated", "error"), 30)
        assert heard.events[-1]["type"] == "session.updated", heard.events[-1]
        reader = asyncio.create_task(read(conn, heard, lambda e: e["type"] == "session.closed", 300))
        await stream(conn, audio)
        await conn.session.close()
        await reader
    assert heard.errors() == [], heard.errors()
    source = heard.text("session.input_transcript.delta")
    assert wer([row["src_text"]], [source]) < 0.6, source
    german = heard.text("session.output_transcript.delta")
    node_text = await text_mt(fleet.node, row["src_text"], "de")
    chrf = sacrebleu.corpus_chrf([german], [[row["deu"]]]).score
    chrf_node = sacrebleu.corpus_chrf([node_text], [[row["deu"]]]).score
    copied = sacrebleu.corpus_chrf([german], [[row["src_text"]]]).score
    print(f"interpreter: {german!r} chrF {chrf:.1f}; node's text MT {node_text!r} chrF {chrf_node:.1f}")
    assert chrf >= 0.5 * chrf_node and chrf > copied, (source, german, node_text)
    assert heard.of("session.output_audio.delta"), "the translation is spoken"


def test_with_the_node_gone_a_draft_fails_with_an_error_id(fleet: Fleet) -> None:
    stop(fleet.node)
    error = check_draft_fails(fleet.front, "mt_node_unavailable", log_chars=400_000)
    assert error["code"] == "processing_failed", error
    # What needs no MT is untouched: the interpreter's voices still speak.
    speech = httpx.post(
        fleet.front.http + "/v1/audio/speech",
        json={"model": "tts-1", "input": "Still here.", "voice": "alloy", "response_format": "pcm"},
        timeout=120,
    )
    assert speech.status_code == 200 and len(speech.content) > RATE // 2, speech.text[:300]
