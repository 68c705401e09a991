"""Bounded re-decode windows on real speech: the session, driven step by step by real Whisper.

A long recording is streamed into one item in 100 ms appends; each due step runs at once
on the engine (as an idle server would), then the item is committed. With the window on,
the item is decoded in windows sealed at pauses; the client must still get one
transcript, its deltas joined, about as accurate as decoding the whole recording at once.
"""

from __future__ import annotations

import base64
import difflib
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.audio.pcm import float_to_pcm16
from dragoman.config import ASRSettings, TranscriptionSettings
from dragoman.engines.asr.base import StepRequest, StepResult
from dragoman.engines.asr.whisper_ct2 import WhisperCT2Engine
from dragoman.engines.registry import create_asr_engine
from dragoman.errors import ClientError
from dragoman.sessions.speech.config import EngineProfile
from dragoman.sessions.transcription.events import AppendAudio, CommitBuffer, Completed, Delta, Error, Failed
from dragoman.sessions.transcription.session import SessionConfig, StepJob, TranscriptionSession
from dragoman.tools.wer import wer
from tests.engine.test_whisper_ct2 import REFS, audio

pytestmark = pytest.mark.engine

RATE = 16_000
#: 29.4 s of read speech with sentence pauses (recorded at 8 kHz).
LONG = "asr/en/en_ls-devclean_1272-128104-0004_8kHz.wav"


@pytest.fixture(scope="module")
def engine(cache_dir: Path) -> WhisperCT2Engine:
    made = create_asr_engine(ASRSettings(model="whisper-base"), cache_dir)
    assert isinstance(made, WhisperCT2Engine)
    return made


@dataclass
class Streamed:
    """The recording streamed as one item: what the client got, and the jobs run."""

    #: Every delta joined, and those that came before the commit.
    deltas: str
    live: str
    transcript: str
    revisions: int
    jobs: list[StepJob]


def stream(engine: WhisperCT2Engine, max_window: float) -> Streamed:
    profile = EngineProfile(engine.name, engine.capabilities, engine.tokenizer, max_item_seconds=300.0)
    settings = TranscriptionSettings(max_window_seconds=max_window)
    config = SessionConfig.defaults(settings, input_rate=RATE)
    session = TranscriptionSession(
        "sess_engine", profile, SessionConfig(**{**config.__dict__, "language": "en"})
    )
    clip = audio(LONG)
    jobs: list[StepJob] = []
    deltas, completed = "", []

    def run_due() -> None:
        nonlocal deltas
        while (job := session.next_job()) is not None:
            jobs.append(job)
            (result,) = engine.transcribe_batch([job.request])
            assert isinstance(result, StepResult), result
            session.job_done(job, result)
        for event in session.events_to_send():
            assert not isinstance(event, Error | Failed), event
            if isinstance(event, Delta):
                deltas += event.delta
            elif isinstance(event, Completed):
                completed.append(event.transcript)

    piece = RATE // 10
    for at in range(0, len(clip), piece):
        session.receive(AppendAudio(base64.b64encode(float_to_pcm16(clip[at : at + piece])).decode()))
        run_due()
    live = deltas
    session.receive(CommitBuffer())
    run_due()
    [transcript] = completed
    return Streamed(deltas, live, transcript, session.revisions, jobs)


def assert_deltas_cover_the_clip(streamed: Streamed) -> None:
    """The deltas join to the transcript, and stream all through the clip.

    A step may revise words already sent (Whisper's hypotheses differ with the CPU's kernels:
    on an AVX2-only EPYC one step heard "Jingle" where the final heard "Jingo poem"). Deltas are
    append-only, so those words stay as sent; everything else must still arrive, as the audio
    comes, up to the end of the transcript.
    """
    sent, truth = streamed.deltas.split(), streamed.transcript.split()
    if streamed.revisions == 0:
        assert streamed.deltas == streamed.transcript
    else:
        matcher = difflib.SequenceMatcher(None, sent, truth, autojunk=False)
        agreed = sum(block.size for block in matcher.get_matching_blocks())
        # A revision changes a word or two; it never stops or loses the rest.
        assert agreed >= len(truth) - 3 * streamed.revisions, (streamed.deltas, streamed.transcript)
        assert len(sent) <= len(truth) + 2 * streamed.revisions, (streamed.deltas, streamed.transcript)
        assert sent[-6:] == truth[-6:], (streamed.deltas, streamed.transcript)
    # Live: before the commit, deltas had already reached all but the last couple of seconds
    # (the unstable tail that is held back) of the 29 s clip.
    live = streamed.live.split()
    assert len(live) >= 0.8 * len(truth), (streamed.live, streamed.transcript)


def test_a_long_item_is_sealed_at_pauses_and_stays_accurate(engine: WhisperCT2Engine) -> None:
    clip = audio(LONG)
    [offline] = engine.transcribe_batch([StepRequest(clip, language="en")])
    assert not isinstance(offline, ClientError)
    streamed = stream(engine, max_window=10.0)
    assert_deltas_cover_the_clip(streamed)
    transcript, jobs = streamed.transcript, streamed.jobs
    windows = [len(j.request.audio) / RATE for j in jobs]
    assert max(windows) <= 12.0, windows  # the bound and a chunk, not the 29 s item
    assert jobs[-1].item.seals >= 2
    assert any(j.request.prompt for j in jobs)  # the sealed text conditions the next window
    reference = REFS[LONG]
    offline_wer, streamed_wer = wer([reference], [offline.text]), wer([reference], [transcript])
    assert streamed_wer <= 1.15 * offline_wer + 0.03, (offline.text, transcript)


def test_without_a_window_every_step_decodes_the_whole_item(engine: WhisperCT2Engine) -> None:
    streamed = stream(engine, max_window=0.0)
    assert_deltas_cover_the_clip(streamed)
    transcript, jobs = streamed.transcript, streamed.jobs
    assert max(len(j.request.audio) for j in jobs) == len(audio(LONG))
    assert jobs[-1].item.seals == 0
    assert wer([REFS[LONG]], [transcript]) < 0.15, transcript
