"""`dragoman mt-server`: MT protocol v1 alone at `/`, a drop-in for alignatt-mt-server.

    dragoman mt-server --preset low_latency --port 8765

WhisperLiveKit's `--translation-backend alignatt` client connects to ws://HOST:PORT/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from dragoman import __version__
from dragoman.config import Settings
from dragoman.cpu import cpu_info
from dragoman.logs import get_logger
from dragoman.transports.readiness import Readiness
from dragoman.transports.services import MTService
from dragoman.transports.websocket.mt import mt_router

log = get_logger(__name__)


def create_mt_app(settings: Settings, service: MTService | None = None) -> FastAPI:
    """The standalone MT app; `service` replaces the one built from `settings` (tests)."""
    mt = service or MTService.from_settings(settings.mt, settings.cache_dir)
    readiness = Readiness(mt.start, what="MT engine")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info(
            "loading",
            host=settings.host,
            port=settings.port,
            preset=mt.default_preset,
            cpu=cpu_info().describe(),
        )
        readiness.start()
        try:
            yield
        finally:
            await readiness.close()
            await mt.close()

    app = FastAPI(title="dragoman mt-server", version=__version__, lifespan=lifespan)
    app.state.mt = mt
    app.state.readiness = readiness

    @app.get("/health")
    async def health() -> JSONResponse:
        status, body = readiness.health(
            lambda: {
                "model": mt.engine.name if mt.engine is not None else None,
                "engine": mt.engine.describe().as_dict() if mt.engine is not None else None,
                "directions": mt.directions,
                "presets": sorted(mt.presets),
                "cpu": cpu_info().as_dict(),
            }
        )
        # Sessions are counted in every state: a client may poll them while loading.
        body |= {"sessions": mt.sessions, "max_sessions": mt.max_sessions}
        return JSONResponse(body, status_code=status)

    app.include_router(mt_router(mt, "/", readiness=readiness))
    return app
