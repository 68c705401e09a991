"""`GET /metrics`: the server in Prometheus's text format, through prometheus-client.

Counted as they happen (`dragoman.metrics`): errors by code, refusals by reason, engine
job latency by lane. Read off the server when scraped (`RuntimeCollector`): sessions by
service, open connections, the work waiting on each engine worker, the ASR batch sizes,
the agent's pool units by state and its usage counters.

Capacity, for an autoscaler: by service, the sessions open (`dragoman_sessions`), the sessions
allowed (`dragoman_sessions_allowed`: past it a session is refused) and the work waiting on
each engine the service uses (`dragoman_engine_queue_depth{service, engine}`; an engine shared
by services, such as the ASR, shows its one queue under each); `dragoman_draining` is 1 from a
SIGTERM on, when the replica takes no new sessions.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dragoman.transports.guard import AccessStats
from dragoman.transports.readiness import Readiness, State
from dragoman.transports.runtime import Runtime

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


#: The engines each service's sessions wait on.
SERVICE_ENGINES: dict[str, tuple[str, ...]] = {
    "transcription": ("asr",),
    "mt": ("mt",),
    "agent": ("asr", "llm", "tts"),
    "interpreter": ("asr", "mt", "tts"),
}


class RuntimeCollector(Collector):
    def __init__(
        self, runtime: Runtime, access: AccessStats, max_connections: int, readiness: Readiness | None = None
    ) -> None:
        self.runtime = runtime
        self.access = access
        self.max_connections = max_connections
        self.readiness = readiness

    def capacity(self) -> dict[str, tuple[int, int]]:
        """(open, allowed) sessions of each running service."""
        runtime = self.runtime
        out: dict[str, tuple[int, int]] = {}
        if runtime.transcription is not None:
            transcription = runtime.transcription
            out["transcription"] = (transcription.sessions, transcription.settings.max_sessions)
        if runtime.mt is not None:
            out["mt"] = (runtime.mt.sessions, runtime.mt.max_sessions)
        if runtime.agent is not None:
            pool = runtime.agent.pool.snapshot()
            out["agent"] = (pool["busy"], pool["size"])
        if runtime.interpreter is not None:
            out["interpreter"] = (runtime.interpreter.sessions, runtime.interpreter.settings.max_sessions)
        return out

    def waiting(self) -> dict[str, int]:
        """The requests or sessions waiting on each loaded engine's worker."""
        runtime = self.runtime
        out: dict[str, int] = {}
        listening = runtime.listening
        if listening is not None and listening.worker is not None:
            out["asr"] = listening.worker.stats.queued
        if runtime.translating is not None and runtime.translating.worker is not None:
            out["mt"] = runtime.translating.waiting
        agent = runtime.agent
        if agent is not None and agent.llm_worker is not None:
            out["llm"] = agent.llm_worker.waiting
        speaking = agent if agent is not None else runtime.interpreter
        if speaking is not None and speaking.tts_worker is not None:
            out["tts"] = speaking.tts_worker.waiting
        return out

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        capacity = self.capacity()
        sessions = GaugeMetricFamily(
            "dragoman_sessions", "Sessions open now, by service.", labels=["service"]
        )
        allowed = GaugeMetricFamily(
            "dragoman_sessions_allowed",
            "Sessions taken at once, by service; past it a new one is refused.",
            labels=["service"],
        )
        for service, (open_now, limit) in capacity.items():
            sessions.add_metric([service], open_now)
            allowed.add_metric([service], limit)
        yield sessions
        yield allowed
        yield GaugeMetricFamily(
            "dragoman_connections", "WebSocket connections open now.", value=self.access.connections
        )
        yield GaugeMetricFamily(
            "dragoman_connections_allowed", "WebSocket connections taken at once.", value=self.max_connections
        )
        draining = self.readiness is not None and self.readiness.state is State.DRAINING
        yield GaugeMetricFamily(
            "dragoman_draining",
            "1 while the server drains for its shutdown: it takes no new sessions.",
            value=int(draining),
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
        waiting = self.waiting()
        per_worker = GaugeMetricFamily(
            "dragoman_worker_waiting", "Requests or sessions waiting on an engine worker.", labels=["worker"]
        )
        for engine, count in waiting.items():
            per_worker.add_metric([engine], count)
        depth = GaugeMetricFamily(
            "dragoman_engine_queue_depth",
            "Work waiting on the engines a service uses, by service and engine.",
            labels=["service", "engine"],
        )
        for service in self.capacity():
            for engine in SERVICE_ENGINES[service]:
                if engine in waiting:
                    depth.add_metric([service, engine], waiting[engine])
        listening = self.runtime.listening
        if listening is not None and listening.worker is not None:
            batches = CounterMetricFamily(
                "dragoman_asr_batches", "ASR engine calls, by batch size.", labels=["size"]
            )
            for size, calls in listening.worker.stats.batch_sizes.items():
                batches.add_metric([str(size)], calls)
            yield batches
        yield per_worker
        yield depth


def mount_metrics(app: FastAPI, runtime: Runtime, access: AccessStats, max_connections: int) -> None:
    """Serve `GET /metrics`: the process's own metrics, then the runtime's."""
    own = CollectorRegistry()
    readiness = getattr(app.state, "readiness", None)
    own.register(RuntimeCollector(runtime, access, max_connections, readiness))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(REGISTRY) + generate_latest(own), media_type=CONTENT_TYPE)
