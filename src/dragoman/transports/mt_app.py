"""`dragoman mt-server`: MT protocol v1 alone at `/`, a drop-in for alignatt-mt-server.

    dragoman mt-server --preset low_latency --port 8765

WhisperLiveKit's `--translation-backend alignatt` client connects to ws://HOST:PORT/.
"""

from __future__ import annotations

from fastapi import FastAPI

from dragoman.config import Settings
from dragoman.transports.connections import apply_policy
from dragoman.transports.readiness import Readiness, mount
from dragoman.transports.services import MTService
from dragoman.transports.websocket.mt import mt_router


def create_mt_app(settings: Settings, service: MTService | None = None) -> FastAPI:
    """The standalone MT app; `service` replaces the one built from `settings` (tests)."""
    mt = service or MTService.from_settings(settings.mt, settings.cache_dir)
    readiness = Readiness(mt.start, what="MT engine")
    app = mount(
        "dragoman mt-server",
        readiness,
        mt.close,
        lambda: {
            "model": mt.engine.name if mt.engine is not None else None,
            "engine": mt.engine.describe().as_dict() if mt.engine is not None else None,
            "directions": mt.directions,
            "presets": sorted(mt.presets),
        },
        # Sessions are counted in every state: a client may poll them while loading.
        always=lambda: {"sessions": mt.sessions, "max_sessions": mt.max_sessions},
        host=settings.host,
        port=settings.port,
        preset=mt.default_preset,
    )
    app.state.mt = mt
    apply_policy(app, settings)
    app.include_router(mt_router(mt, "/", readiness=readiness))
    return app
