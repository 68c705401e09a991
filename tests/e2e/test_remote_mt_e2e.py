"""A remote MT backend, for real: a `python -m llama_cpp.server` serves the packaged 0.5B GGUF
on a free loopback port, and `dragoman serve --services mt --mt-base-url` translates MT
protocol v1 sessions through its `POST /v1/chat/completions`.

The server gives text, not attention, so the session commits by LocalAgreement between
consecutive re-translations (`streaming/local_agreement.py`): FLORES sentences are fed word by
word as a streaming ASR would, the committed text only ever grows, words are committed before
the utterance ends, and the finals are held to the FLORES German by chrF. With the LLM server
gone, a draft fails with an error id and /health answers 503 `degraded`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
import sacrebleu
from websockets.sync.client import ClientConnection, connect

from dragoman.engines.mt.chat_translation import BACKEND
from dragoman.weights import resolve
from harness.llama_server import llama_server
from harness.server import Server, start, stop
from tests.e2e.mt_fixtures import flores
from tests.unit.polling import wait_for

pytestmark = pytest.mark.e2e

#: Short FLORES devtest lines (those test_mt_e2e uses).
SENTENCES = [7, 40, 60]
#: test_mt_e2e's floor for the same 0.5B through AlignAtt and the WhisperLiveKit client (it
#: scores 26.5 there; the English copied through unchanged scores 14.7).
MIN_CHRF = 20.0


@dataclass
class Remote:
    server: Server
    #: Stops the llama_cpp.server (the LLM node going down).
    stop_llm: Callable[[], None]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Remote]:
    logs = tmp_path_factory.mktemp("remote-mt")
    model = resolve("qwen2.5-0.5b-instruct-gguf", cache_dir)
    with ExitStack() as llm:
        base_url = llm.enter_context(llama_server(model, logs / "llama.log", threads=1))
        args = ["serve", "--cache-dir", str(cache_dir), "--services", "mt", "--mt-directions", "en-de"]
        args += ["--mt-base-url", base_url, "--mt-remote-model", "qwen2.5-0.5b-instruct"]
        running = start(args, logs / "dragoman.log", timeout=600.0)
        yield Remote(running, llm.close)
        stop(running)


def test_health_names_the_remote_backend_and_its_reachability(remote: Remote) -> None:
    answer = httpx.get(remote.server.http + "/health", timeout=30)
    body = answer.json()
    assert answer.status_code == 200, body
    [mt] = [engine for engine in body["engines"] if engine["role"] == "mt"]
    assert mt["backend"] == BACKEND and mt["device"] == "remote", mt
    [probe] = body["remotes"]
    assert probe["role"] == "mt" and probe["reachable"], probe


def translate(
    ws: ClientConnection, utterance: int, sentence: str, seq: int, start_ms: float
) -> tuple[list[dict[str, Any]], int]:
    """Feed `sentence` word by word from `start_ms` (two words of unstable tail), then its
    final; every reply, and the last seq."""
    words = sentence.split()
    timed = [[word, start_ms + 400.0 * i, start_ms + 400.0 * i + 300.0] for i, word in enumerate(words)]
    replies = []
    for end in range(2, len(words) + 1, 2):
        seq += 1
        update = {"type": "update", "seq": seq, "utterance_id": utterance, "words": timed[:end]}
        tail = {"words": [[word, 0.0, 0.0] for word in words[end : end + 2]]}
        ws.send(json.dumps(update | {"tail": tail, "clock_ms": start_ms + 400.0 * end + 100.0}))
        replies.append(json.loads(ws.recv(timeout=180)))
    seq += 1
    final = {"type": "update", "seq": seq, "utterance_id": utterance, "words": timed, "is_final": True}
    ws.send(json.dumps(final | {"clock_ms": start_ms + 400.0 * len(words) + 500.0}))
    while not replies[-1].get("final"):
        replies.append(json.loads(ws.recv(timeout=180)))
    return replies, seq


def test_mt_protocol_v1_through_the_remote_server(remote: Remote) -> None:
    pairs = flores(SENTENCES)
    finals, early = [], 0
    with connect(remote.server.ws + "/v1/mt") as ws:
        ws.send(json.dumps({"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}))
        ok = json.loads(ws.recv(timeout=60))
        assert ok["type"] == "init_ok" and ok["direction"] == "en-de", ok
        seq = 0
        for utterance, (english, _) in enumerate(pairs):
            replies, seq = translate(ws, utterance, english, seq, start_ms=60_000.0 * utterance)
            assert all(r["type"] == "translation" for r in replies), replies
            texts = [r["committed_text"] for r in replies]
            # Append-only: what was committed is never taken back.
            assert all(b.startswith(a) for a, b in pairwise(texts)), texts
            partial = [r for r in replies if not r["final"]]
            assert all(r["stop_reason"] == "local_agreement" for r in partial), partial
            early += any(r["committed_text"] for r in partial)
            finals.append(texts[-1])
    print("finals:", finals)
    chrf = sacrebleu.corpus_chrf(finals, [[german for _, german in pairs]]).score
    copied = sacrebleu.corpus_chrf([e for e, _ in pairs], [[g for _, g in pairs]]).score
    print(f"chrF {chrf:.1f} (English copied: {copied:.1f}); {early} of {len(pairs)} committed early")
    assert chrf >= MIN_CHRF, (chrf, finals)
    assert early >= 1, "LocalAgreement committed words before an utterance ended"


def test_with_the_llm_server_gone_a_draft_fails_with_an_error_id(remote: Remote) -> None:
    remote.stop_llm()
    with connect(remote.server.ws + "/v1/mt") as ws:
        ws.send(json.dumps({"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}))
        assert json.loads(ws.recv(timeout=60))["type"] == "init_ok"
        words = [["Good", 0.0, 300.0], ["morning.", 400.0, 700.0]]
        final = {"type": "update", "seq": 1, "utterance_id": 0, "words": words, "is_final": True}
        ws.send(json.dumps(final | {"clock_ms": 1000.0}))
        error = json.loads(ws.recv(timeout=120))
    assert error["type"] == "error" and "error id err_" in error["message"], error
    assert "127.0.0.1" not in error["message"], "no server address reaches the client"
    # The id the client got finds the cause in the server's log.
    error_id = re.findall(r"err_[0-9a-f]+", error["message"])[0]
    logged = [line for line in remote.server.log_tail(200_000).splitlines() if error_id in line]
    assert logged and "mt_server_unavailable" in logged[0], logged
    wait_for(lambda: httpx.get(remote.server.http + "/health", timeout=10).status_code == 503, 15.0)
    body = httpx.get(remote.server.http + "/health", timeout=10).json()
    assert body["status"] == "degraded" and not body["remotes"][0]["reachable"], body
