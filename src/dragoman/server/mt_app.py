"""`dragoman mt-server`: MT protocol v1 alone at `/`, a drop-in for alignatt-mt-server.

    dragoman mt-server --preset low_latency --port 8765

WhisperLiveKit's `--translation-backend alignatt` client connects to ws://HOST:PORT/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from dragoman import __version__
from dragoman.config import Settings
from dragoman.logs import get_logger
from dragoman.server.mt_ws import MTService, mt_router

log = get_logger(__name__)


def create_mt_app(settings: Settings, service: MTService | None = None) -> FastAPI:
    """The standalone MT app; `service` replaces the one built from `settings` (tests)."""
    mt = service or MTService.from_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await mt.start()
        log.info("mt-server ready", host=settings.host, port=settings.port, preset=mt.default_preset)
        try:
            yield
        finally:
            await mt.close()

    app = FastAPI(title="dragoman mt-server", version=__version__, lifespan=lifespan)
    app.state.mt = mt

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok" if mt.engine is not None else "loading",
            "version": __version__,
            "model": mt.engine.name if mt.engine is not None else None,
            "directions": mt.directions,
            "presets": sorted(mt.presets),
            "sessions": mt.sessions,
            "max_sessions": mt.max_sessions,
        }

    app.include_router(mt_router(mt, "/"))
    return app
