"""The demo page: `GET /` and its assets under `/static/`, plain files with no build step.

The page is a third-party client like any other: it speaks only the public protocols
(Realtime transcription over a WebSocket, the voice agent over WebRTC, MT protocol v1),
and gets its keys from `POST /v1/realtime/client_secrets`. The access guard leaves these
paths open, since a browser cannot send a key with a page load.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).with_name("static")


def mount_web(app: FastAPI) -> None:
    """Serve the page at `/` and its files at `/static/`."""

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
