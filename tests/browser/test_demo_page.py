"""Each service of the demo page, tried as a person would: the page in headless Chromium hears a
recording through its microphone, and what it shows must hold most of the recording's words
(or of its reference translation). Screenshots go to test-artifacts/browser/."""

from __future__ import annotations

import base64
import csv
import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.browser.conftest import PLAYWRIGHT, chromium_or_skip

if not PLAYWRIGHT:
    chromium_or_skip(allow_module_level=True)

from playwright.sync_api import Page

from harness.realtime_helpers import EVAL, load_audio, reference
from harness.server import Server, start, stop
from tests.browser.page import (
    ARTIFACTS,
    RATE,
    browser,
    found_chars,
    found_fraction,
    microphone_wav,
    open_page,
    screenshot,
)

pytestmark = pytest.mark.e2e

SPEECH = "asr/en/en_jfk_inaugural_1961.flac"
QUESTION = "asr/en/en_ls-devclean_1272-128104-0000.wav"
TRANSLATED = "asr/en/en_fleurs_test_000.ogg"
INTERRUPTION = "asr/en/en_ls-testclean_1995-1837-0001.wav"
KEY = "sk-page-test"


@pytest.fixture(scope="module")
def keyed_server(
    chromium: str, tmp_path_factory: pytest.TempPathFactory, cache_dir: Path
) -> Iterator[Server]:
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "--api-key", KEY]
    running = start(args, tmp_path_factory.mktemp("keyed") / "dragoman.log", timeout=300.0)
    yield running
    stop(running)


def translation_reference(file: str, column: str) -> str:
    with (EVAL / "speech_translation.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return next(row[column] for row in rows if row["file"] == file)


def wait_for(page: Page, condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        page.wait_for_timeout(500)
    return condition()


#: Keeps every event the page receives on its data channel, for the test's record.
RECORD_EVENTS = """
window.dataChannelEvents = [];
const createDataChannel = RTCPeerConnection.prototype.createDataChannel;
RTCPeerConnection.prototype.createDataChannel = function (...args) {
  const channel = createDataChannel.apply(this, args);
  channel.addEventListener("message", (m) => window.dataChannelEvents.push(JSON.parse(m.data)));
  return channel;
};
"""
#: Notes whether a turn's line showed text while the turn was still open (before its final text).
SAW_PARTIAL = """() => {
  window.sawPartial = false;
  const output = document.getElementById("transcribe-output");
  new MutationObserver(() => {
    for (const line of output.querySelectorAll(".line.pending")) {
      const text = line.querySelector(".settled").textContent + line.querySelector(".tail").textContent;
      if (text.replace("…", "").trim()) window.sawPartial = true;
    }
  }).observe(output, { subtree: true, childList: true, characterData: true });
}"""


def test_the_page_loads_with_its_three_services(chromium: str, page_server: Server, tmp_path: Path) -> None:
    errors: list[str] = []
    wav = microphone_wav(SPEECH, tmp_path / "mic.wav")
    with browser(chromium, wav) as chrome:
        page = open_page(chrome, page_server.http + "/", errors)
        page.wait_for_selector('#health[data-state="ready"]', timeout=20_000)
        tabs = page.locator('[role="tab"]')
        assert tabs.all_inner_texts() == ["Transcribe", "Talk", "Interpreter"]
        assert all(tab.is_enabled() for tab in tabs.all())
        screenshot(page, "page")
        page.set_viewport_size({"width": 390, "height": 844})
        screenshot(page, "page-phone")
    assert errors == []


def test_live_transcription_shows_the_words_spoken(
    chromium: str, page_server: Server, tmp_path: Path
) -> None:
    errors: list[str] = []
    wav = microphone_wav(SPEECH, tmp_path / "mic.wav")
    expected = reference(SPEECH)
    with browser(chromium, wav) as chrome:
        page = open_page(chrome, page_server.http + "/#transcribe", errors)
        page.select_option("#transcribe-language", "en")
        page.evaluate(SAW_PARTIAL)
        page.click("#transcribe-start")
        page.wait_for_selector('#transcribe-state[data-state="live"]', timeout=30_000)
        finals = page.locator("#transcribe-output .line:not(.pending)")
        heard = wait_for(
            page, lambda: found_fraction(expected, " ".join(finals.all_inner_texts())) >= 0.75, 120
        )
        page.wait_for_selector("#transcribe-output .latency", timeout=30_000)
        screenshot(page, "transcribe")
        shown = " ".join(finals.all_inner_texts())
        # Each turn's text showed while it was still open (settled text and the grey tail).
        partial = page.evaluate("window.sawPartial")
        page.click("#transcribe-start")
    assert partial and heard, f"the page shows {shown!r}; the recording says {expected!r}"
    assert page_errors(errors) == []


def test_with_keys_the_page_trades_the_typed_key_for_a_short_lived_one(
    chromium: str, keyed_server: Server, tmp_path: Path
) -> None:
    errors: list[str] = []
    wav = microphone_wav(SPEECH, tmp_path / "mic.wav")
    expected = reference(SPEECH)
    with browser(chromium, wav) as chrome:
        page = open_page(chrome, keyed_server.http + "/#transcribe", errors)
        page.click("#transcribe-start")
        page.wait_for_selector("#error:not([hidden])", timeout=20_000)
        assert "needs an API key" in page.inner_text("#error")
        screenshot(page, "keyed-no-key")
        page.fill("#api-key", KEY)
        page.click("#transcribe-start")
        output = page.locator("#transcribe-output")
        # The WebSocket carries the ephemeral key as a subprotocol, which Chromium insists the server picks.
        heard = wait_for(page, lambda: found_fraction(expected, output.inner_text()) >= 0.8, 120)
        shown = output.inner_text()
        page.click("#transcribe-start")
    assert heard, f"the page shows {shown!r}; the recording says {expected!r}"
    # The refused mint (401) is the only error the browser logged.
    assert [e for e in page_errors(errors) if "401" not in e] == []


def test_a_spoken_conversation_over_webrtc(chromium: str, page_server: Server, tmp_path: Path) -> None:
    errors: list[str] = []
    wav = microphone_wav(QUESTION, tmp_path / "mic.wav", trail_s=30.0)
    expected = reference(QUESTION)
    with browser(chromium, wav) as chrome:
        page = open_page(chrome, page_server.http + "/#talk", errors, init_script=RECORD_EVENTS)
        page.click("#talk-start")
        output = page.locator("#talk-output")
        user = page.locator("#talk-output .bubble.user .text")
        agent = page.locator("#talk-output .bubble.agent .text")
        heard = wait_for(
            page,
            lambda: user.count() > 0 and found_fraction(expected, " ".join(user.all_inner_texts())) >= 0.6,
            120,
        )
        answered = wait_for(
            page, lambda: agent.count() > 0 and len(agent.first.inner_text().strip()) > 3, 120
        )
        # The answer's audio started playing in the page (output_audio_buffer.started).
        page.wait_for_selector("#talk-output .bubble.agent .latency", timeout=60_000)
        playing = page.evaluate("document.getElementById('talk-audio').srcObject !== null")
        # The call's events, beside the screenshot, for whoever reads a failure.
        events = page.evaluate("window.dataChannelEvents")
        (ARTIFACTS / "talk-events.json").write_text(json.dumps(events, indent=1, ensure_ascii=False))
        screenshot(page, "talk")
        shown = output.inner_text()
        page.click("#talk-start")
    assert heard, f"the page shows {shown!r}; the recording says {expected!r}"
    assert answered and playing, shown
    assert page_errors(errors) == []


#: The microphone as the test drives it: silence, and a recording played into the call when the
#: test says (`window.speak(wav in base64)`), so that the interruption starts once the answer is
#: heard playing, whatever the machine's speed.
MICROPHONE = """
(() => {
  const context = new AudioContext({ sampleRate: 48000 });
  const line = context.createMediaStreamDestination();
  // Silence between recordings, as a real microphone sends: without it the track has no frames
  // and the server's VAD never hears a turn end.
  const quiet = context.createConstantSource();
  quiet.offset.value = 0;
  quiet.connect(line);
  quiet.start();
  window.speak = async (wavBase64) => {
    const bytes = Uint8Array.from(atob(wavBase64), (c) => c.charCodeAt(0));
    const audio = await context.decodeAudioData(bytes.buffer);
    const source = context.createBufferSource();
    source.buffer = audio;
    source.connect(line);
    await context.resume();
    source.start();
    return audio.duration;
  };
  navigator.mediaDevices.getUserMedia = async () => {
    await context.resume();
    return line.stream;
  };
})();
"""


def wav_base64(file: str, rate: int = RATE) -> str:
    out = io.BytesIO()
    soundfile.write(out, load_audio(file, rate).astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return base64.b64encode(out.getvalue()).decode()


def test_speaking_over_the_answer_interrupts_it(chromium: str, page_server: Server, tmp_path: Path) -> None:
    """A question; once its answer is heard playing, more speech over it."""
    silence = tmp_path / "silence.wav"
    soundfile.write(silence, np.zeros(RATE, dtype=np.float32), RATE, subtype="PCM_16")
    errors: list[str] = []
    with browser(chromium, silence) as chrome:
        page = open_page(chrome, page_server.http + "/#talk", errors, init_script=RECORD_EVENTS + MICROPHONE)
        page.fill("#talk-instructions", "Tell a long story about the sea, in many sentences.")
        page.click("#talk-start")

        def seen(kind: str) -> Callable[[], bool]:
            return lambda: kind in [e["type"] for e in page.evaluate("window.dataChannelEvents")]

        def kinds_now() -> list[str]:
            return [e["type"] for e in page.evaluate("window.dataChannelEvents")]

        assert wait_for(page, seen("session.created"), 60), "the call's data channel did not open"
        spoken = page.evaluate("(wav) => window.speak(wav)", wav_base64(QUESTION))
        assert spoken > 1, spoken
        assert wait_for(page, seen("output_audio_buffer.started"), 150), kinds_now()
        page.evaluate("(wav) => window.speak(wav)", wav_base64(INTERRUPTION))
        cut = wait_for(page, seen("output_audio_buffer.cleared"), 60)
        page.wait_for_timeout(1000)
        screenshot(page, "talk-barge-in")
        events = page.evaluate("window.dataChannelEvents")
        (ARTIFACTS / "talk-barge-in-events.json").write_text(json.dumps(events, indent=1, ensure_ascii=False))
        interrupted = page.locator("#talk-output .bubble.agent.interrupted").count()
        page.click("#talk-start")
    kinds = [event["type"] for event in events]
    started = kinds.index("output_audio_buffer.started")
    # The interruption was heard while the answer played (it had not stopped by itself), and cut it.
    assert "input_audio_buffer.speech_started" in kinds[started:], kinds
    heard = started + kinds[started:].index("input_audio_buffer.speech_started")
    assert "output_audio_buffer.stopped" not in kinds[started:heard], kinds
    assert cut and "output_audio_buffer.cleared" in kinds[heard:], kinds
    assert interrupted >= 1, "the page marks the cut-off answer"
    assert page_errors(errors) == []


#: The translated speech's loudest level the page measured on the remote track (0 before any).
LOUDEST = "Number(document.getElementById('interpreter-audio').dataset.loudest || 0)"


@pytest.mark.parametrize(("target", "column"), [("de", "deu"), ("zh", "zho_Hans")])
def test_the_interpreter_shows_and_speaks_the_translation(
    chromium: str, page_server: Server, tmp_path: Path, target: str, column: str
) -> None:
    errors: list[str] = []
    wav = microphone_wav(TRANSLATED, tmp_path / "mic.wav")
    source = translation_reference(TRANSLATED, "eng")
    expected = translation_reference(TRANSLATED, column)
    score = found_chars if target == "zh" else found_fraction
    with browser(chromium, wav) as chrome:
        page = open_page(chrome, page_server.http + "/#interpreter", errors, init_script=RECORD_EVENTS)
        page.select_option("#interpreter-target", target)
        page.click("#interpreter-start")
        heard_text = page.locator("#interpreter-output .source .text")
        shown_text = page.locator("#interpreter-output .target .text")
        streaming = wait_for(page, lambda: bool(shown_text.inner_text().strip()), 120)
        screenshot(page, f"interpreter-{target}-streaming")
        done = wait_for(page, lambda: score(expected, shown_text.inner_text()) >= 0.4, 180)
        spoken = wait_for(page, lambda: page.evaluate(LOUDEST) > 0.01, 60)
        microphones = page.locator("#interpreter-mic option").count()
        screenshot(page, f"interpreter-{target}")
        heard, shown = heard_text.inner_text(), shown_text.inner_text()
        page.click("#interpreter-start")  # Stop: session.close, the rest is said, then session.closed
        closed = wait_for(
            page, lambda: page.locator('#interpreter-state[data-state="closed"]').count() == 1, 60
        )
        events = page.evaluate("window.dataChannelEvents")
        (ARTIFACTS / f"interpreter-{target}-events.json").write_text(
            json.dumps(events, indent=1, ensure_ascii=False)
        )
    assert streaming
    assert found_fraction(source, heard) >= 0.7, f"heard {heard!r}; the recording says {source!r}"
    assert done, f"the page shows {shown!r}; the reference is {expected!r}"
    assert spoken, "the translated speech is heard on the call's track"
    assert microphones >= 2, "the browser's microphones are listed to pick from"
    assert closed and events[-1]["type"] == "session.closed", [e["type"] for e in events][-5:]
    assert page_errors(errors) == []


def page_errors(errors: list[str]) -> list[str]:
    """The page's own errors (a media element's autoplay notice is the browser's, not ours)."""
    return [error for error in errors if "play()" not in error]
