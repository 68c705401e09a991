"""The real servers the end-to-end tests drive, each started once for all the tests that share it.

* `server`: one `dragoman serve` with every service (as `make serve` runs it), shared by
  the whole package (test_serve_all and test_transcription_e2e), stopped when it ends.
* `mt_server`: the standalone `dragoman mt-server` (MT at "/", with its own session
  limit), for test_mt_e2e only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets.sync.client

from harness.server import Server, start, stop
from tests.e2e.mt_fixtures import MT_MAX_SESSIONS, MT_PRESET, FrameRecorder


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """`dragoman serve` with every service on one port (the MT model pinned)."""
    log = tmp_path_factory.mktemp("serve") / "dragoman.log"
    # The MT model pinned to the 1.5B, as for the page (tests/browser/conftest.py): `auto`
    # takes the 0.5B on a CPU that measures too slow at start-up.
    running = start(["serve", "--cache-dir", str(cache_dir), "--preset", "low_latency"], log, timeout=600.0)
    yield running
    stop(running)


@pytest.fixture(scope="module")
def mt_server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """`dragoman mt-server` with the packaged MT model."""
    log = tmp_path_factory.mktemp("mt-server") / "dragoman.log"
    args = ["mt-server", "--cache-dir", str(cache_dir), "--preset", MT_PRESET]
    args += ["--max-sessions", str(MT_MAX_SESSIONS), "--log-level", "debug"]
    running = start(args, log, timeout=600.0)
    yield running
    stop(running)


@pytest.fixture
def frames(monkeypatch: pytest.MonkeyPatch) -> FrameRecorder:
    """The frames of every connection the WhisperLiveKit client opens during a test."""
    recorder = FrameRecorder()
    monkeypatch.setattr(websockets.sync.client, "connect", recorder.connect)
    return recorder
