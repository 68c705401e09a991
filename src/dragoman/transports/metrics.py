"""`GET /metrics`: the server in Prometheus's text format, through prometheus-client.

Counted as they happen (`dragoman.metrics`): errors by code, refusals by reason, engine
job latency by lane. Read off the server when scraped (`RuntimeCollector`): sessions by
service, open connections, the work waiting on each engine worker, the ASR batch sizes,
the agent's pool units by state and its usage counters.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dragoman.transports.guard import AccessStats
from dragoman.transports.runtime import Runtime

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class RuntimeCollector(Collector):
    def __init__(self, runtime: Runtime, access: AccessStats) -> None:
        self.runtime = runtime
        self.access = access

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        sessions = GaugeMetricFamily(
            "dragoman_sessions", "Sessions open now, by service.", labels=["service"]
        )
        if runtime.transcription is not None:
            sessions.add_metric(["transcription"], runtime.transcription.sessions)
        if runtime.mt is not None:
            sessions.add_metric(["mt"], runtime.mt.sessions)
        if runtime.agent is not None:
            sessions.add_metric(["agent"], runtime.agent.pool.snapshot()["busy"])
        if runtime.interpreter is not None:
            sessions.add_metric(["interpreter"], runtime.interpreter.sessions)
        yield sessions
        yield GaugeMetricFamily(
            "dragoman_connections", "WebSocket connections open now.", value=self.access.connections
        )
        yield from self._workers()
        if runtime.agent is not None:
            pool = runtime.agent.pool.snapshot()
            units = GaugeMetricFamily(
                "dragoman_pool_units", "Agent pipeline units, by state.", labels=["state"]
            )
            for state in ("idle", "busy", "quarantined"):
                units.add_metric([state], pool[state])
            yield units
            usage = CounterMetricFamily(
                "dragoman_agent", "The voice agent's usage counters.", labels=["counter"]
            )
            for key, value in runtime.agent.usage_report()["counters"].items():
                usage.add_metric([key], value)
            yield usage

    def _workers(self) -> Iterator[Metric]:
        runtime = self.runtime
        waiting = GaugeMetricFamily(
            "dragoman_worker_waiting", "Requests or sessions waiting on an engine worker.", labels=["worker"]
        )
        listening = runtime.listening
        if listening is not None and listening.worker is not None:
            stats = listening.worker.stats
            waiting.add_metric(["asr"], stats.queued)
            batches = CounterMetricFamily(
                "dragoman_asr_batches", "ASR engine calls, by batch size.", labels=["size"]
            )
            for size, calls in stats.batch_sizes.items():
                batches.add_metric([str(size)], calls)
            yield batches
        if runtime.translating is not None and runtime.translating.worker is not None:
            waiting.add_metric(["mt"], runtime.translating.worker.waiting)
        agent = runtime.agent
        if agent is not None and agent.llm_worker is not None and agent.tts_worker is not None:
            waiting.add_metric(["llm"], agent.llm_worker.waiting)
            waiting.add_metric(["tts"], agent.tts_worker.waiting)
        yield waiting


def mount_metrics(app: FastAPI, runtime: Runtime, access: AccessStats) -> None:
    """Serve `GET /metrics`: the process's own metrics, then the runtime's."""
    own = CollectorRegistry()
    own.register(RuntimeCollector(runtime, access))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(REGISTRY) + generate_latest(own), media_type=CONTENT_TYPE)
