"""A real nginx (Debian's, `make nginx`) on a free loopback port in front of dragoman replicas,
as a team's own load balancer would be: round robin, WebSocket upgrades passed through."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.redis_server import free_port

CONFIG = """
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    upstream dragoman {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://dragoman;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 3600s;
            proxy_buffering off;
        }}
    }}
}}
"""


@contextmanager
def nginx(folder: Path, upstreams: Sequence[int]) -> Iterator[str]:
    """Run nginx in front of the loopback ports `upstreams` until the block ends; yields its
    http URL. Skips (loudly) without the binary."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if binary is None:
        pytest.skip(
            "nginx is not installed (`make nginx` installs Debian's): the load-balancer test cannot run"
        )
    port = free_port()
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;" for p in upstreams)
    config = folder / "nginx.conf"
    config.write_text(CONFIG.format(folder=folder, servers=servers, port=port))
    with (folder / "nginx.out").open("wb") as out:
        process = subprocess.Popen(
            [binary, "-c", str(config), "-p", str(folder)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (
                        (folder / "error.log").read_text(errors="replace")
                        if (folder / "error.log").exists()
                        else ""
                    )
                    raise RuntimeError(f"nginx did not start: {log[-2000:]}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
