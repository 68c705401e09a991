"""A real nginx (Debian's, `make nginx`) on a free loopback port in front of dragoman replicas,
as a team's own load balancer would be: round robin, WebSocket upgrades passed through, and a
WebRTC call's `DELETE` and sideband (`?call_id=`) sent to the replica its id names
(`rtc_<replica>_…`, `--replica-id`); docs/deploy.md shows the same map."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
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
    # The replica a WebRTC call id names: in the path of its DELETE, or in a sideband's query.
    map $uri $call_in_path {{
        ~^/v1/realtime/(?:translations/)?calls/rtc_([A-Za-z0-9-]+)_ $1;
        default "";
    }}
    map $arg_call_id $call_in_query {{
        ~^rtc_([A-Za-z0-9-]+)_ $1;
        default "";
    }}
    # Its upstream; everything else (and a name no replica has) goes round robin.
    map $call_in_path$call_in_query $dragoman_upstream {{
{routes}
        default dragoman;
    }}
    upstream dragoman {{
{servers}
    }}
{replicas}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://$dragoman_upstream;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 3600s;
            proxy_buffering off;
        }}
    }}
}}
"""


def config(folder: Path, port: int, replicas: Mapping[str, int]) -> str:
    """nginx's config: listen on `port`, in front of `replicas` (replica id: loopback port)."""
    servers = "\n".join(
        f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;" for p in replicas.values()
    )
    routes = "\n".join(f"        {name} replica_{name};" for name in replicas)
    one = "    upstream replica_{} {{ server 127.0.0.1:{}; }}"
    named = "\n".join(one.format(name, p) for name, p in replicas.items())
    return CONFIG.format(folder=folder, servers=servers, routes=routes, replicas=named, port=port)


@contextmanager
def nginx(folder: Path, replicas: Mapping[str, int]) -> Iterator[str]:
    """Run nginx in front of `replicas` (each replica's `--replica-id`: its loopback port) until
    the block ends; yields its http URL. Skips (loudly) without the binary."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if binary is None:
        pytest.skip(
            "nginx is not installed (`make nginx` installs Debian's): the load-balancer test cannot run"
        )
    port = free_port()
    written = folder / "nginx.conf"
    written.write_text(config(folder, port, replicas))
    with (folder / "nginx.out").open("wb") as out:
        process = subprocess.Popen(
            [binary, "-c", str(written), "-p", str(folder)], stdout=out, stderr=subprocess.STDOUT
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
