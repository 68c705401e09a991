"""The demo page's files are served, and open to a browser even on a server with keys."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from dragoman.transports.guard import AccessGuard
from dragoman.transports.web import STATIC, mount_web


def app() -> FastAPI:
    served = FastAPI()
    mount_web(served)

    @served.get("/v1/models")
    async def models() -> dict[str, str]:
        return {"object": "list"}

    served.add_middleware(AccessGuard, api_keys=("sk-one",), max_connections=4)
    return served


def test_the_page_and_every_file_it_loads_are_served_without_a_key() -> None:
    client = TestClient(app())
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)
    imported = {
        f"/static/{name}"
        for path in STATIC.glob("*.js")
        for name in re.findall(r'from "\./([\w-]+\.js)"', path.read_text())
    }
    assert "/static/app.js" in assets and imported
    for asset in {*assets, *imported, "/static/capture-worklet.js"}:
        assert client.get(asset).status_code == 200, asset
    assert client.get("/v1/models").status_code == 401, "everything else still needs the key"
    for escape in ("/static/../guard.py", "/static/%2e%2e/guard.py", "/static/..%2fguard.py"):
        assert client.get(escape).status_code in (401, 404), escape
