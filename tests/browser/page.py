"""Driving the demo page: a fake microphone from a recording, the page in headless Chromium,
and what the page shows, normalised and compared with the recording's reference."""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile
from playwright.sync_api import Browser, Page, sync_playwright

from harness.realtime_helpers import load_audio
from harness.server import REPO

#: Where the screenshots go (gitignored), one per test.
ARTIFACTS = REPO / "test-artifacts" / "browser"
RATE = 48_000


def microphone_wav(file: str, out: Path, lead_s: float = 0.5, trail_s: float = 12.0) -> Path:
    """The recording as Chromium's fake capture wants it (16-bit PCM wav), with silence after it
    so that the server's turn detection hears the end of the speech."""
    audio = load_audio(file, RATE)
    padded = np.concatenate([np.zeros(int(lead_s * RATE)), audio, np.zeros(int(trail_s * RATE))])
    soundfile.write(out, padded.astype(np.float32), RATE, subtype="PCM_16")
    return out


@contextlib.contextmanager
def browser(chromium: str, wav: Path) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=[
                "--use-fake-device-for-media-stream",
                "--use-fake-ui-for-media-stream",
                # %noloop: the recording is said once, then the microphone is silent.
                f"--use-file-for-fake-audio-capture={wav}%noloop",
                "--autoplay-policy=no-user-gesture-required",
            ],
        )
        try:
            yield launched
        finally:
            launched.close()


def open_page(browser: Browser, url: str, errors: list[str], init_script: str | None = None) -> Page:
    context = browser.new_context(viewport={"width": 1180, "height": 860}, permissions=["microphone"])
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url)
    return page


def screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def words(text: str) -> list[str]:
    """Lower-case words without punctuation (NFKC; digits kept as written)."""
    text = unicodedata.normalize("NFKC", text).lower()
    return re.findall(r"[^\W_]+", text)


def found_fraction(reference: str, shown: str) -> float:
    """The fraction of the reference's distinct words that the page shows."""
    wanted = set(words(reference))
    return len(wanted & set(words(shown))) / max(1, len(wanted))


def found_chars(reference: str, shown: str) -> float:
    """For text without spaces (Chinese): the fraction of the reference's distinct characters shown."""
    wanted = {c for c in reference if unicodedata.category(c).startswith("L")}
    return len(wanted & set(shown)) / max(1, len(wanted))
