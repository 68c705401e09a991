"""A real nginx (Debian's, `make nginx`) on a free loopback port in front of dragoman replicas,
as a team's own load balancer would be: round robin, WebSocket upgrades passed through, and a
WebRTC call's `DELETE` and sideband (`?call_id=`) sent to the replica its id names
(`rtc_<replica>_…`, `--replica-id`); docs/deploy.md shows the same map."""

from __future__ import annotations

import functools
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.subprocess_server import answers, free_port, serving, wait_ready

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
        # Which config the workers run: a reload is over when this answers the new one.
        location = /nginx-generation {{ return 200 "{generation}"; }}
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


def config(folder: Path, port: int, replicas: Mapping[str, int], generation: int = 0) -> str:
    """nginx's config: listen on `port`, in front of `replicas` (replica id: loopback port)."""
    servers = "\n".join(
        f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;" for p in replicas.values()
    )
    routes = "\n".join(f"        {name} replica_{name};" for name in replicas)
    one = "    upstream replica_{} {{ server 127.0.0.1:{}; }}"
    named = "\n".join(one.format(name, p) for name, p in replicas.items())
    return CONFIG.format(
        folder=folder, servers=servers, routes=routes, replicas=named, port=port, generation=generation
    )


@dataclass
class Balancer:
    """A running nginx: where clients go, and how to point it at other replicas."""

    url: str
    folder: Path
    port: int
    process: subprocess.Popen[bytes]
    generation: int = 0

    def route(self, replicas: Mapping[str, int]) -> None:
        """Reload nginx in front of `replicas`, as a team replacing a replica would; returns once
        its workers run the new config (connections open through the old ones stay open)."""
        self.generation += 1
        (self.folder / "nginx.conf").write_text(config(self.folder, self.port, replicas, self.generation))
        self.process.send_signal(signal.SIGHUP)
        wait_ready(
            "nginx",
            self.process,
            lambda: self._generation() == str(self.generation),
            20,
            logs(self.folder),
            interval=0.05,
            becoming="reload",
        )

    def _generation(self) -> str:
        try:
            with urllib.request.urlopen(self.url + "/nginx-generation", timeout=2) as answer:
                return str(answer.read().decode())
        except OSError:
            return ""


def logs(folder: Path) -> list[Path]:
    """What nginx says before it reads its config (its output), and after (its error log)."""
    return [folder / "nginx.out", folder / "error.log"]


@contextmanager
def nginx(folder: Path, replicas: Mapping[str, int]) -> Iterator[Balancer]:
    """Run nginx in front of `replicas` (each replica's `--replica-id`: its loopback port) until
    the block ends. Skips (loudly) without the binary."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if binary is None:
        pytest.skip(
            "nginx is not installed (`make nginx` installs Debian's): the load-balancer test cannot run"
        )
    port = free_port()
    written = folder / "nginx.conf"
    written.write_text(config(folder, port, replicas))
    url = f"http://127.0.0.1:{port}"
    argv = [binary, "-c", str(written), "-p", str(folder)]
    [out, error_log] = logs(folder)
    ready = functools.partial(answers, url + "/health")
    with serving("nginx", argv, out, ready, 20, grace=10, interval=0.1, logs=[error_log]) as process:
        yield Balancer(url, folder, port, process)
