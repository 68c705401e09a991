"""Whether the remote engines this server leans on can be reached, for `GET /health`.

A replica whose ASR, MT, TTS or LLM server is down cannot serve the sessions that need it, so
`/health` says which backend is down and answers 503 (`"status": "degraded"`): a load
balancer then sends new sessions to a replica that can serve them, and takes this one back
once its backends answer again. Open sessions are not touched.

A probe is one `GET {base_url}/models` with a short timeout: cheap on every OpenAI-compatible
server (OpenAI, vLLM, llama.cpp's server, speaches, dragoman), and it checks the API key too.
A server that answers 404 or 405 there still answers: it is up. An MT protocol v1 node
(`ws://host:port/...`) is probed with `GET http://host:port/health` instead: a dragoman node
answers 503 while it loads or drains, and a node that takes no new session is down for a
front-end that would open its sessions there. Results are cached for
`ttl_s`, and one probe round runs at a time however many health checks come at once, so a
load balancer's polling never turns into load on the inference servers.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from dragoman.config import Settings
from dragoman.engines.llm.remote import safe_url
from dragoman.logs import get_logger

log = get_logger(__name__)

#: The LLM backends that talk to a server (`engines/llm/remote.py`).
REMOTE_LLM_BACKENDS = frozenset({"chat-completions", "responses"})
#: Statuses of `GET /models` that still show a server that is up: some serve no model list.
_UP_WITHOUT_LIST = frozenset({404, 405})


@dataclass(frozen=True)
class RemoteTarget:
    """A remote engine: its role, its OpenAI-compatible base URL and API key."""

    role: str
    base_url: str
    api_key: str = ""
    #: The URL probed, when it is not `{base_url}/models` (an MT node's `/health`).
    probe_url: str | None = None


@dataclass(frozen=True)
class ProbeResult:
    role: str
    url: str
    reachable: bool
    #: Why not, in words with no secret in them; empty when reachable.
    reason: str
    latency_ms: float
    #: Seconds since the Unix epoch when the probe ran.
    checked_at: float

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": self.role,
            "url": self.url,
            "reachable": self.reachable,
            "latency_ms": self.latency_ms,
            "checked_at": round(self.checked_at, 3),
        }
        if self.reason:
            out["reason"] = self.reason
        return out


def remote_targets(settings: Settings) -> list[RemoteTarget]:
    """The remote engines the enabled services use."""
    services = set(settings.services)
    targets = []
    if settings.asr.base_url and services & {"transcription", "agent", "interpreter"}:
        targets.append(RemoteTarget("asr", settings.asr.base_url, settings.asr.api_key))
    if settings.mt.nodes and services & {"mt", "interpreter"}:
        targets += [
            RemoteTarget("mt", url, settings.mt.api_key, node_health_url(url)) for url in settings.mt.nodes
        ]
    elif settings.mt.base_url and services & {"mt", "interpreter"}:
        targets.append(RemoteTarget("mt", settings.mt.base_url, settings.mt.api_key))
    if settings.llm.backend in REMOTE_LLM_BACKENDS and "agent" in services:
        targets.append(RemoteTarget("llm", settings.llm.base_url, settings.llm.api_key))
    if settings.tts.base_url and services & {"agent", "interpreter"}:
        targets.append(RemoteTarget("tts", settings.tts.base_url, settings.tts.api_key))
    return targets


class RemoteProbes:
    """The cached reachability of each remote engine."""

    def __init__(self, targets: list[RemoteTarget], *, timeout_s: float = 2.0, ttl_s: float = 5.0) -> None:
        self.targets = targets
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self._results: list[ProbeResult] = []
        self._checked = -float("inf")
        self._lock = asyncio.Lock()

    async def results(self) -> list[ProbeResult]:
        """Each target's last probe, run again when older than `ttl_s`."""
        if not self.targets:
            return []
        async with self._lock:  # one round at a time; those who waited take its results
            if time.monotonic() - self._checked >= self.ttl_s:
                async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                    self._results = list(await asyncio.gather(*(probe(client, t) for t in self.targets)))
                self._checked = time.monotonic()
                for result in self._results:
                    if not result.reachable:
                        log.warning(
                            "remote engine unreachable",
                            role=result.role,
                            url=result.url,
                            reason=result.reason,
                        )
            return self._results

    async def health(self, status: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`/health`'s answer with the remote engines in it: 503 `degraded` when a ready
        server cannot reach one of them."""
        if status != 200 or not self.targets:
            return status, body
        results = await self.results()
        body = body | {"remotes": [result.as_dict() for result in results]}
        if not all(result.reachable for result in results):
            return 503, body | {"status": "degraded"}
        return status, body


def node_health_url(node: str) -> str:
    """An MT protocol v1 node's `/health`: ws://host:port/any -> http://host:port/health."""
    parts = urlsplit(node)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    host = parts.netloc.rpartition("@")[2]  # no credentials: /health needs none
    return urlunsplit((scheme, host, "/health", "", ""))


async def probe(client: httpx.AsyncClient, target: RemoteTarget) -> ProbeResult:
    """One `GET {base_url}/models` (or the target's `probe_url`)."""
    url = target.probe_url or target.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    began, wall = time.perf_counter(), time.time()
    reason = ""
    try:
        response = await client.get(url, headers=headers)
        if response.status_code >= 400 and response.status_code not in _UP_WITHOUT_LIST:
            reason = f"HTTP {response.status_code}"
    except httpx.TimeoutException:
        reason = "no answer in time"
    except httpx.HTTPError as exc:
        reason = f"cannot be reached ({type(exc).__name__})"
    latency = round((time.perf_counter() - began) * 1000, 1)
    return ProbeResult(target.role, safe_url(target.base_url), not reason, reason, latency, wall)
