"""What the two remote-MT deployments are checked for alike (test_remote_mt_e2e: an LLM server
behind `--mt-base-url`; test_remote_mt_protocol_e2e: a dragoman node behind `--mt-node`): the
front's `/health` names the remote backend and whether it answers, and with the remote gone a
draft fails with an error id that finds the cause in the front's log, and `/health` degrades.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

from harness.server import Server
from tests.unit.polling import wait_for

#: Short FLORES devtest lines (those test_mt_e2e uses).
SENTENCES = [7, 40, 60]
#: test_mt_e2e's floor for the same 0.5B against the FLORES German (it scores 26.5 there, through
#: AlignAtt and the WhisperLiveKit client; the English copied through unchanged scores 14.7).
MIN_CHRF = 20.0
INIT = {"type": "init", "protocol_version": 1, "source_lang": "en", "target_lang": "de"}


@contextmanager
def mt_session(url: str) -> Iterator[ClientConnection]:
    """An MT protocol v1 session, en→de, its `init_ok` read."""
    with connect(url) as ws:
        ws.send(json.dumps(INIT))
        ok = json.loads(ws.recv(timeout=60))
        assert ok["type"] == "init_ok" and ok["direction"] == "en-de", ok
        yield ws


def check_remote_health(server: Server, backend: str) -> None:
    """`/health` answers 200, its MT engine is `backend` on a remote device, and the one remote
    it probes, the MT's, is reachable."""
    answer = httpx.get(server.http + "/health", timeout=30)
    body = answer.json()
    assert answer.status_code == 200, body
    [mt] = [engine for engine in body["engines"] if engine["role"] == "mt"]
    assert mt["backend"] == backend and mt["device"] == "remote", mt
    [probe] = body["remotes"]
    assert probe["role"] == "mt" and probe["reachable"], probe


def check_draft_fails(server: Server, cause: str, log_chars: int) -> dict[str, Any]:
    """With the remote gone: a final update's draft fails with an error id and no server
    address, the id finds `cause` in the last `log_chars` of the server's log, and `/health`
    turns 503 `degraded`. The error event."""
    with mt_session(server.ws + "/v1/mt") as ws:
        words = [["Good", 0.0, 300.0], ["morning.", 400.0, 700.0]]
        final = {"type": "update", "seq": 1, "utterance_id": 0, "words": words, "is_final": True}
        ws.send(json.dumps(final | {"clock_ms": 1000.0}))
        error: dict[str, Any] = json.loads(ws.recv(timeout=120))
    assert error["type"] == "error" and "error id err_" in error["message"], error
    assert "127.0.0.1" not in error["message"], "no server address reaches the client"
    # The id the client got finds the cause in the server's log.
    error_id = re.findall(r"err_[0-9a-f]+", error["message"])[0]
    logged = [line for line in server.log_tail(log_chars).splitlines() if error_id in line]
    assert logged and cause in logged[0], logged
    wait_for(lambda: httpx.get(server.http + "/health", timeout=10).status_code == 503, 15.0)
    body = httpx.get(server.http + "/health", timeout=10).json()
    assert body["status"] == "degraded" and not body["remotes"][0]["reachable"], body
    return error
