"""`/metrics` capacity, for an autoscaler: by service the sessions open and allowed and the work
waiting on each engine it uses, and whether the replica drains (a runtime of stand-in services)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dragoman.transports.guard import AccessStats
from dragoman.transports.metrics import RuntimeCollector
from dragoman.transports.readiness import Readiness, State
from dragoman.transports.runtime import Runtime


async def _no_load() -> None:
    return None


def runtime() -> Runtime:
    listening = SimpleNamespace(
        sessions=3,
        settings=SimpleNamespace(max_sessions=16),
        worker=SimpleNamespace(stats=SimpleNamespace(queued=5, batch_sizes={2: 7})),
    )
    pool = {"size": 2, "busy": 1, "idle": 1, "quarantined": 0}
    agent = SimpleNamespace(
        pool=SimpleNamespace(snapshot=lambda: pool),
        llm_worker=SimpleNamespace(waiting=1),
        tts_worker=SimpleNamespace(waiting=4),
        usage_report=lambda: {"counters": {"responses": 9}},
    )
    mt = SimpleNamespace(sessions=0, max_sessions=4, worker=SimpleNamespace(waiting=2), waiting=2)
    fake = SimpleNamespace(
        transcription=listening, listening=listening, agent=agent, mt=mt, translating=mt, interpreter=None
    )
    return cast(Runtime, fake)


def scrape(collector: RuntimeCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_sessions_open_and_allowed_and_queue_depth_by_service() -> None:
    readiness = Readiness(_no_load)
    readiness.state = State.READY
    access = AccessStats(connections=4)
    samples = scrape(RuntimeCollector(runtime(), access, 64, readiness))
    assert value(samples, "dragoman_sessions", service="transcription") == 3
    assert value(samples, "dragoman_sessions_allowed", service="transcription") == 16
    assert value(samples, "dragoman_sessions", service="agent") == 1
    assert value(samples, "dragoman_sessions_allowed", service="agent") == 2
    assert value(samples, "dragoman_sessions_allowed", service="mt") == 4
    assert ("dragoman_sessions_allowed", (("service", "interpreter"),)) not in samples, "not running"
    depth = {
        (dict(labels)["service"], dict(labels)["engine"]): v
        for (name, labels), v in samples.items()
        if name == "dragoman_engine_queue_depth"
    }
    assert depth == {
        ("transcription", "asr"): 5,
        ("mt", "mt"): 2,
        ("agent", "asr"): 5,
        ("agent", "llm"): 1,
        ("agent", "tts"): 4,
    }
    assert value(samples, "dragoman_connections") == 4
    assert value(samples, "dragoman_connections_allowed") == 64
    assert value(samples, "dragoman_draining") == 0
    readiness.drain()
    assert value(scrape(RuntimeCollector(runtime(), access, 64, readiness)), "dragoman_draining") == 1
