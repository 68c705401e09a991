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
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from websockets.sync.client import ClientConnection

from dragoman.engines.mt.chat_translation import BACKEND
from dragoman.weights import resolve
from harness.llama_server import llama_server
from harness.server import Server, start, stop
from tests.e2e.mt_fixtures import flores
from tests.e2e.remote_mt import MIN_CHRF, SENTENCES, check_draft_fails, check_remote_health, mt_session

pytestmark = pytest.mark.e2e


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
    check_remote_health(remote.server, BACKEND)


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
    with mt_session(remote.server.ws + "/v1/mt") as ws:
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
    check_draft_fails(remote.server, "mt_server_unavailable", log_chars=200_000)
