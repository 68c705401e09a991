"""The demo page in a real headless Chromium (Debian's `chromium`, driven by Playwright).

Chromium's fake capture device plays a recording from `../shared/eval` as the microphone
(`--use-file-for-fake-audio-capture`), so the page hears real speech through the same
getUserMedia, AudioWorklet and WebRTC paths a person's browser takes. `make test` installs
Chromium when it is missing; where it cannot, these tests skip, loudly.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import Server, start, stop

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = (
    "BROWSER TESTS SKIPPED: no Chromium on this machine (Debian's `chromium`); "
    "`make test` installs it with apt-get when it can (as root): apt-get install -y chromium"
)
try:
    import playwright.sync_api  # noqa: F401

    PLAYWRIGHT = True
except ImportError:
    PLAYWRIGHT = False
    MISSING = "BROWSER TESTS SKIPPED: the playwright package is missing (pip install -e '.[dev]')"
_skipped: list[str] = []


def chromium_or_skip(allow_module_level: bool = False) -> str:
    if CHROMIUM is None or not PLAYWRIGHT:
        if not _skipped:
            warnings.warn(MISSING, stacklevel=2)
        _skipped.append(MISSING)
        pytest.skip(MISSING, allow_module_level=allow_module_level)
    return CHROMIUM


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_sep("!", MISSING, red=True, bold=True)


@pytest.fixture(scope="package")
def chromium() -> str:
    return chromium_or_skip()


@pytest.fixture(scope="package")
def page_server(chromium: str, tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    """`dragoman serve` with every service, as `make serve` runs it (the MT model pinned)."""
    log = tmp_path_factory.mktemp("browser-serve") / "dragoman.log"
    # The MT model pinned to the 1.5B: `auto` measures the CPU at start-up and takes the 0.5B
    # where the 1.5B decodes too slowly (a CI run on a Xeon slowed by a neighbour did, and the
    # page's German then missed the reference), so the translations checked would depend on
    # the machine's speed.
    running = start(["serve", "--cache-dir", str(cache_dir), "--preset", "low_latency"], log, timeout=600.0)
    yield running
    stop(running)
