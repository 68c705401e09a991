"""Running an app under uvicorn: the one place that binds the listening socket."""

from __future__ import annotations

from fastapi import FastAPI

from dragoman.config import Settings
from dragoman.transports.readiness import Readiness, State


def run(app: FastAPI, settings: Settings) -> int:
    """Serve `app` until stopped; exit status 1 when its engines failed to load."""
    import uvicorn

    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, ws="websockets")
    server = uvicorn.Server(config)
    readiness: Readiness = app.state.readiness

    def stop() -> None:
        server.should_exit = True

    readiness.on_failure = stop
    server.run()
    return 1 if readiness.state is State.FAILED else 0
