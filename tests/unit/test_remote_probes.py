"""Which remote engines /health probes, and how a probe's result reads (the probes themselves
run against real servers in tests/e2e/test_remote_asr_e2e.py)."""

from __future__ import annotations

import asyncio

from dragoman.config import load_settings
from dragoman.transports.remote_probes import ProbeResult, RemoteProbes, RemoteTarget, remote_targets


def test_only_the_remote_engines_of_enabled_services_are_probed() -> None:
    assert remote_targets(load_settings()) == [], "the defaults are all local"
    everything = {
        "asr.base_url": "http://asr:8000/v1",
        "asr.api_key": "k1",
        "tts.base_url": "http://tts:8000/v1",
        "llm.backend": "chat-completions",
        "llm.base_url": "http://llm:8080/v1",
        "mt.base_url": "http://mt:8080/v1",
    }
    roles = [t.role for t in remote_targets(load_settings(None, **everything))]
    assert roles == ["asr", "mt", "llm", "tts"]
    transcription_only = load_settings(None, **everything, services=["transcription"])
    assert remote_targets(transcription_only) == [RemoteTarget("asr", "http://asr:8000/v1", "k1")]
    assert [t.role for t in remote_targets(load_settings(None, **everything, services=["mt"]))] == ["mt"]
    interpreter = load_settings(None, **everything, services=["interpreter"])
    assert [t.role for t in remote_targets(interpreter)] == ["asr", "mt", "tts"]


def test_a_server_with_no_remote_engine_answers_as_before() -> None:
    probes = RemoteProbes([])
    body = {"status": "ok"}
    assert asyncio.run(probes.health(200, body)) == (200, body)


def test_a_server_that_is_not_ready_is_not_probed() -> None:
    probes = RemoteProbes([RemoteTarget("asr", "http://asr.invalid/v1")])
    body = {"status": "loading"}
    assert asyncio.run(probes.health(503, body)) == (503, body)


def test_a_result_says_why_and_nothing_secret() -> None:
    up = ProbeResult("asr", "http://asr:8000/v1", True, "", 3.2, 1700000000.1234)
    assert up.as_dict() == {
        "role": "asr",
        "url": "http://asr:8000/v1",
        "reachable": True,
        "latency_ms": 3.2,
        "checked_at": 1700000000.123,
    }
    down = ProbeResult("tts", "http://tts:8000/v1", False, "HTTP 401", 1.0, 0.0)
    assert down.as_dict()["reason"] == "HTTP 401" and not down.as_dict()["reachable"]
