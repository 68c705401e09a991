"""The deployment of issue 27 on one machine, all on loopback, for test_load_balancer_e2e.

A real nginx (`nginx_server.py`) in front of two `dragoman serve` front-ends, replicas `a` and
`b`, that share a client-secret key and a real Redis (`redis_server.py`) and run no model of
their own but the VAD: ASR and voices come from a third dragoman, the engine node, over
`POST /v1/audio/transcriptions` and `POST /v1/audio/speech` (`--asr-base-url`,
`--tts-base-url`), and the LLM from a real `llama_cpp.server` over chat completions, as they
would from GPU servers.
"""

from __future__ import annotations

import itertools
import os
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from prometheus_client.parser import text_string_to_metric_families

from dragoman.weights import resolve
from harness.llama_server import llama_server
from harness.server import Server, start, stop
from tests.e2e.nginx_server import Balancer, nginx
from tests.e2e.redis_server import redis_server

API_KEY = "sk-fleet"
REPLICAS = ("a", "b")


@dataclass(frozen=True)
class Fleet:
    balancer: Balancer
    #: The front-ends by replica id.
    fronts: dict[str, Server]
    node: Server
    #: Starts a front-end with a replica id; stopped when the fleet is.
    start_front: Callable[[str], Server]

    @property
    def url(self) -> str:
        """nginx's URL: where clients go."""
        return self.balancer.url

    @property
    def ws(self) -> str:
        return self.url.replace("http", "ws", 1)

    def replace(self, name: str) -> Server:
        """A new front-end for replica `name` (one that has gone), with nginx reloaded in front
        of it, as a team replacing a crashed replica would."""
        self.fronts[name] = self.start_front(name)
        self.balancer.route({replica: front.port for replica, front in self.fronts.items()})
        return self.fronts[name]


@contextmanager
def fleet(folder: Path, cache_dir: Path, drain_seconds: float) -> Iterator[Fleet]:
    """Start the whole fleet; stop every part of it when the block ends."""
    with ExitStack() as stack:
        redis_url = stack.enter_context(redis_server(folder))
        model = resolve("qwen2.5-0.5b-instruct-gguf", cache_dir)
        # Both front-ends' agents ask it at once: llama_cpp.server's default would cut the first
        # answer short (`[DONE]`) when the second request comes, so requests queue instead.
        llm = stack.enter_context(llama_server(model, folder / "llama.log", interrupt=False))
        common = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "agent"]
        common += ["--llm-backend", "chat-completions", "--llm-base-url", llm]
        node = start([*common, "--log-level", "debug"], folder / "node.log", timeout=900.0)
        stack.callback(stop, node)
        # A loaded 2-core machine runs all of this: a step may take the node longer than the
        # remote ASR's default 60 s, and a step that times out is a failure.
        config = folder / "front.toml"
        config.write_text("[asr]\ntimeout_s = 180\n")
        front = [*common, "--config", str(config), "--api-key", API_KEY, "--num-pipelines", "2"]
        front += ["--asr-base-url", node.http + "/v1", "--tts-base-url", node.http + "/v1"]
        front += ["--client-secret-key", "fleet-" + "k" * 40, "--redis-url", redis_url]
        front += ["--drain-seconds", str(drain_seconds)]
        started = itertools.count()

        def start_front(name: str) -> Server:
            # No STUN server, as on a machine with no route out: loopback needs none.
            with mock.patch.dict(os.environ, {"DRAGOMAN_ICE_SERVERS": "[]"}):
                log = folder / f"{name}-{next(started)}.log"
                server = start([*front, "--replica-id", name], log, 600.0)
            stack.callback(stop, server)
            return server

        fronts = {name: start_front(name) for name in REPLICAS}
        balancer = stack.enter_context(nginx(folder, {name: s.port for name, s in fronts.items()}))
        yield Fleet(balancer, fronts, node, start_front)


def metrics(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """`server`'s /metrics: each sample's value by its name and its sorted labels."""
    request = urllib.request.Request(server.http + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(server: Server, name: str, **labels: str) -> float | None:
    """One sample of `server`'s /metrics; None when it has none."""
    return metrics(server).get((name, tuple(sorted(labels.items()))))


def sessions(server: Server, service: str) -> float | None:
    return metric(server, "dragoman_sessions", service=service)
