"""Bounded re-decode windows in a transcription session: sealing, seen by the client.

A scripted engine stands in for Whisper: it "hears" the words of a script whose audio
lies wholly inside the step's window, honours the forced prefix and says where each
word starts, as Whisper's alignment does. The client must see one item and one
transcript, whatever the windows were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.engines.asr.base import StepResult, WordStart
from dragoman.sessions.transcription.session import StepJob
from tests.unit.test_transcription_session import WireSession, b64, make_session, send

RATE = 16_000
WORD_SECONDS = 0.4


@dataclass(frozen=True)
class Script:
    words: list[str]
    #: Where each word starts, in seconds of the item.
    starts: list[float]

    @classmethod
    def regular(cls, n: int, gaps: list[float]) -> Script:
        starts, t = [], 0.2
        for i in range(n):
            starts.append(t)
            t += WORD_SECONDS + gaps[i % len(gaps)]
        return cls([f"w{i}" for i in range(n)], starts)

    @property
    def seconds(self) -> float:
        return self.starts[-1] + WORD_SECONDS + 0.5

    def audio(self) -> np.ndarray:
        rng = np.random.default_rng(0)
        audio = (rng.standard_normal(int(self.seconds * RATE)) * 1e-4).astype(np.float32)
        t = np.arange(int(WORD_SECONDS * RATE)) / RATE
        word = (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
        for start in self.starts:
            a = int(start * RATE)
            audio[a : a + len(word)] += word
        return audio

    @property
    def text(self) -> str:
        return " ".join(self.words)


def hear(script: Script, session: WireSession, job: StepJob) -> StepResult:
    """What a well-behaved engine says for `job`: the script's words whose middle is in its
    window (a forced cut may split a word; the side with most of it says it)."""
    start = job.item.window_start / RATE
    end = start + len(job.request.audio) / RATE
    text, words = "", []
    for word, at in zip(script.words, script.starts, strict=True):
        if at + WORD_SECONDS / 2 >= start and at + WORD_SECONDS <= end + 1e-6:
            words.append(WordStart(chars=len(text), seconds=at - start))
            text += " " + word
    assert text.startswith(job.request.prefix), (text, job.request.prefix)
    return StepResult(text=text, language="en", words=tuple(words) if job.request.word_times else ())


def stream(
    script: Script, chunk: float = 1.0, **settings: Any
) -> tuple[WireSession, list[dict[str, Any]], list[StepJob]]:
    session = make_session(vad=False, chunk_seconds=chunk, **settings)
    session.events_to_send()
    events: list[dict[str, Any]] = []
    jobs: list[StepJob] = []
    audio = script.audio()
    piece = int(chunk * RATE)
    for at in range(0, len(audio), piece):
        events += send(session, "input_audio_buffer.append", audio=b64(audio[at : at + piece]))
        while (job := session.next_job()) is not None:
            jobs.append(job)
            session.job_done(job, hear(script, session, job))
            events += session.events_to_send()
    events += send(session, "input_audio_buffer.commit")
    while (job := session.next_job()) is not None:
        jobs.append(job)
        session.job_done(job, hear(script, session, job))
        events += session.events_to_send()
    # Planning may complete the item without the engine (its last step decoded it all).
    events += session.events_to_send()
    return session, events, jobs


def transcript_of(events: list[dict[str, Any]]) -> tuple[str, str]:
    """(deltas joined, the completed transcript) of the one item."""
    deltas = "".join(
        e["delta"] for e in events if e["type"] == "conversation.item.input_audio_transcription.delta"
    )
    [completed] = [e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed"]
    assert len({e["item_id"] for e in events if "item_id" in e}) == 1
    return deltas, completed["transcript"]


def test_a_long_item_is_decoded_in_bounded_windows() -> None:
    script = Script.regular(40, gaps=[0.05, 0.05, 0.45])  # a pause every third word; 20 s
    session, events, jobs = stream(script, max_window_seconds=6.0)
    deltas, completed = transcript_of(events)
    assert deltas == completed == script.text
    assert session.revisions == 0
    assert not session.front._decoder.committed  # the item completed
    longest = max(len(j.request.audio) for j in jobs) / RATE
    assert longest <= 6.0 + 1.0, longest  # the bound plus one chunk
    # The sealed text goes to the decoder as its previous text.
    prompted = [j for j in jobs if j.request.prompt]
    assert prompted
    for job in prompted:  # the end (16-48 tokens, here words) of the text sealed before its window
        assert job.request.prompt is not None
        words = job.request.prompt.split()
        assert 16 <= len(words) <= 48 and " ".join(words) in script.text, job.request.prompt
    last = jobs[-1]
    assert last.final and last.request.prompt is not None
    assert not last.request.word_times  # a final step is never cut


def test_the_same_item_without_a_window_decodes_from_its_start() -> None:
    script = Script.regular(40, gaps=[0.05, 0.05, 0.45])
    _session, events, jobs = stream(script, max_window_seconds=0.0)
    deltas, completed = transcript_of(events)
    assert deltas == completed == script.text
    assert max(len(j.request.audio) for j in jobs) == int(script.seconds * RATE)
    assert not any(j.request.prompt or j.request.word_times for j in jobs)


def test_the_user_prompt_comes_before_the_sealed_text() -> None:
    script = Script.regular(30, gaps=[0.45])
    _session, events, jobs = stream(script, max_window_seconds=4.0, unfixed_tokens=2)
    _, completed = transcript_of(events)
    assert completed == script.text
    session2 = make_session(vad=False)
    item_prompt = jobs[-1].item.prompt(session2.session.engine.tokenizer, "Names: Zed.")
    assert item_prompt is not None and item_prompt.startswith("Names: Zed. w")


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=45),
    gaps=st.lists(st.sampled_from([0.02, 0.08, 0.2, 0.5, 1.2]), min_size=1, max_size=6),
    chunk=st.sampled_from([0.5, 1.0, 2.0]),
    window=st.sampled_from([0.0, 3.0, 6.0, 10.0]),
    unfixed_chunks=st.integers(min_value=0, max_value=3),
    unfixed_tokens=st.integers(min_value=0, max_value=6),
)
def test_deltas_join_to_the_completed_transcript_whatever_the_windows(
    n: int, gaps: list[float], chunk: float, window: float, unfixed_chunks: int, unfixed_tokens: int
) -> None:
    script = Script.regular(n, gaps)
    if script.seconds > 29.0:
        return  # past the fake engine's 30 s item cap
    session, events, _jobs = stream(
        script,
        chunk=chunk,
        max_window_seconds=window,
        unfixed_chunks=unfixed_chunks,
        unfixed_tokens=unfixed_tokens,
    )
    deltas, completed = transcript_of(events)
    assert completed == script.text
    assert deltas == completed
    assert session.revisions == 0


def test_the_window_is_a_server_setting() -> None:
    from dragoman.cli import _overrides, _parser
    from dragoman.config import load_settings
    from dragoman.sessions.speech.config import SessionConfig

    args = _parser().parse_args(["serve", "--max-window-seconds", "0"])
    settings = load_settings(args.config, **_overrides(args))
    assert settings.transcription.max_window_seconds == 0.0
    assert SessionConfig.defaults(settings.transcription, 16_000).max_window_seconds == 0.0
    assert load_settings(None).transcription.max_window_seconds == 10.0
