"""Ready means ready: engines load and warm up after the socket opens, and /health says so.

A server that answered `/health` while its MT model still loaded made the first
update of the first session wait 16-19 s. So the app opens its socket at once,
loads and warms every enabled engine in the background, answers `/health` with
503 `{"status": "loading"}` and refuses sessions until that is done, then 200.
A load that fails leaves the server `failed` (503, with the error id that finds it
in the log) and asks the process to exit, so `make serve` does not sit there
serving nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import StrEnum
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from dragoman import __version__
from dragoman.cpu import cpu_info
from dragoman.errors import with_error_id
from dragoman.logs import get_logger, log_failure

log = get_logger(__name__)

#: What a session opened before the engines are ready is told.
LOADING_MESSAGE = "The server is still loading its models; try again when GET /health answers 200."
FAILED_MESSAGE = "The server failed to load its models"
#: What a session opened while the server drains for its shutdown is told.
DRAINING_MESSAGE = "The server is shutting down; connect again to reach another one."


class State(StrEnum):
    LOADING = "loading"
    READY = "ok"
    FAILED = "failed"
    #: Shutting down: open sessions run on, new ones are refused (`serve.py`).
    DRAINING = "draining"


class Readiness:
    """Runs `load` once in the background and tracks whether it finished."""

    def __init__(self, load: Callable[[], Awaitable[None]], *, what: str = "engines") -> None:
        self._load = load
        self._what = what
        self.state = State.LOADING
        self.error_id: str | None = None
        self.load_seconds: float | None = None
        #: Called when loading failed: the serving process stops (set by `serve.run`).
        self.on_failure: Callable[[], None] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin loading; returns at once (call from the app's lifespan)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"load-{self._what}")

    async def close(self) -> None:
        """Stop waiting for a load that is still going (shutdown)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        began = time.perf_counter()
        try:
            await self._load()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error_id = log_failure(log, f"loading the {self._what} failed", exc)
            self.state = State.FAILED
            if self.on_failure is not None:
                self.on_failure()
            return
        self.load_seconds = round(time.perf_counter() - began, 2)
        if self.state is State.LOADING:  # a drain that began meanwhile holds
            self.state = State.READY
        log.info("server ready", what=self._what, seconds=self.load_seconds)

    def drain(self) -> None:
        """From now on /health answers 503 draining and sessions are refused (a rolling update's
        load balancer sends them elsewhere); those open run on."""
        if self.state is not State.FAILED:
            self.state = State.DRAINING

    def health(self, details: Callable[[], dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of `GET /health`; `details` adds what the loaded engines report."""
        body: dict[str, Any] = {"status": self.state.value, "version": __version__}
        if self.state is State.READY:
            return 200, body | {"load_seconds": self.load_seconds} | details()
        if self.state is State.FAILED:
            body["error"] = {
                "message": with_error_id(FAILED_MESSAGE, self.error_id),
                "error_id": self.error_id,
            }
        return 503, body

    def refusal(self) -> str | None:
        """Why a session cannot start now, or None when the engines are ready."""
        if self.state is State.LOADING:
            return LOADING_MESSAGE
        if self.state is State.DRAINING:
            return DRAINING_MESSAGE
        if self.state is State.FAILED:
            return with_error_id(FAILED_MESSAGE, self.error_id)
        return None


def mount(
    app_title: str,
    readiness: Readiness,
    close: Callable[[], Awaitable[None]],
    details: Callable[[], dict[str, Any]],
    *,
    always: Callable[[], dict[str, Any]] = dict,
    remotes: Callable[[int, dict[str, Any]], Awaitable[tuple[int, dict[str, Any]]]] | None = None,
    **log_fields: Any,
) -> FastAPI:
    """A FastAPI app that loads in the background (`readiness`) and answers `GET /health`.

    `details` adds what the loaded engines report once ready; `always` what holds in
    every state. `close` releases the engines at shutdown. `remotes` adds the reachability of
    the remote engines to a ready server's answer (`remote_probes.py`).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("loading", **log_fields, cpu=cpu_info().describe())
        readiness.start()
        try:
            yield
        finally:
            await readiness.close()
            await close()

    app = FastAPI(title=app_title, version=__version__, lifespan=lifespan)
    app.state.readiness = readiness

    @app.get("/health")
    async def health() -> JSONResponse:
        status, body = readiness.health(lambda: details() | {"cpu": cpu_info().as_dict()})
        if remotes is not None:
            status, body = await remotes(status, body)
        return JSONResponse(body | always(), status_code=status)

    return app
