"""What the engines on other servers share: one HTTP client per server, and its failures as
engine failures with the server named (never its credentials).

A connect is retried a bounded number of times (httpx's transport retries connects only: a
request that reached the server is never sent twice); a server that cannot be reached or does
not answer within `timeout_s` raises the role's `unavailable` failure, one that answers with an
error or with no JSON its `error` failure. Both are server faults, logged here with their error
id, which is all a client is told.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.remote import safe_url
from dragoman.errors import EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)


class RemoteServer:
    """The OpenAI-compatible server at `base_url` that an engine of `role` ("ASR", "MT") uses."""

    def __init__(
        self,
        role: str,
        base_url: str,
        *,
        api_key: str,
        timeout_s: float,
        connect_retries: int,
        unavailable: type[EngineFailure],
        error: type[EngineFailure],
        max_connections: int | None = None,
    ) -> None:
        self.role = role
        self.where = safe_url(base_url)
        self._unavailable = unavailable
        self._error = error
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max_connections) if max_connections else httpx.Limits()
        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            limits=limits,
            transport=httpx.HTTPTransport(retries=connect_retries),
        )

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        """`POST {base_url}/{path}`; the answer whatever its status."""
        try:
            return self._client.post(path, **kwargs)
        except httpx.TimeoutException as exc:
            raise self._failure(self._unavailable, "did not answer in time") from exc
        except httpx.TransportError as exc:
            raise self._failure(self._unavailable, f"cannot be reached: {exc}") from exc

    def json_of(self, response: httpx.Response) -> Any:
        """The JSON body of a successful answer."""
        if response.status_code >= 400:
            raise self._failure(self._error, f"answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            return response.json()
        except ValueError as exc:
            raise self._failure(self._error, "answered with no JSON") from exc

    def fault(self, what: str) -> EngineFailure:
        """The role's `error` failure for an answer that lacks `what`."""
        return self._failure(self._error, f"answered without {what}")

    def _failure(self, kind: type[EngineFailure], what: str) -> EngineFailure:
        """A failure of `kind`, logged here with its error id: not every worker logs the
        failures it passes on, and the id a client is given must find the cause."""
        failure = kind(f"the {self.role} server at {self.where} {what}")
        log.error("remote engine failed", error_id=failure.error_id, code=failure.code, error=failure.message)
        return failure

    def warm_up(self, call: Callable[[], None]) -> None:
        """Run the engine's warm-up, so that a server that is down shows in the log at start-up;
        the server starts anyway: sessions that do not need this engine are not held up by it."""
        try:
            call()
        except EngineFailure as exc:
            log.warning(
                f"the remote {self.role} server failed its warm-up", where=self.where, error=exc.message
            )

    def describe(self, model: str, backend: str) -> EngineInfo:
        return EngineInfo(name=f"{model}@{self.where}", backend=backend, device="remote")

    def close(self) -> None:
        self._client.close()
