"""A file's windows on the shared batching worker: BULK priority, bounded in flight, in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytest

from dragoman.config import FileTranscriptionSettings
from dragoman.engines.asr.base import (
    ASRCapabilities,
    ASREngine,
    PrefixMode,
    StepRequest,
    StepResult,
    WordStart,
)
from dragoman.engines.workers import BatchingWorker
from dragoman.errors import ClientError
from dragoman.protocol.audio_transcriptions import TranscriptionParams
from dragoman.streaming.file_windows import Window
from dragoman.transports.file_transcription import FileTranscriber
from tests.unit.fakes import ByteTokenizer

RATE = 16_000


class LengthEngine(ASREngine):
    """Says how long each request's audio is, with a word start at 0; records its calls."""

    name = "length"
    capabilities = ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT)
    tokenizer = ByteTokenizer()

    def __init__(self) -> None:
        self.calls: list[list[StepRequest]] = []
        self.lock = threading.Lock()

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        with self.lock:
            self.calls.append(list(requests))
        time.sleep(0.01)  # long enough for the other windows to queue behind the call
        return [
            StepResult(
                f" w{len(r.audio) // RATE}. Done.",
                language="en",
                words=(WordStart(0, 0.0), WordStart(4, 0.5)) if r.word_times else (),
                avg_logprob=-0.2,
                no_speech_prob=0.01,
            )
            for r in requests
        ]


def _files(engine: LengthEngine, in_flight: int, monkeypatch: pytest.MonkeyPatch) -> FileTranscriber:
    worker: BatchingWorker[StepRequest, StepResult] = BatchingWorker(engine.transcribe_batch, name="asr")
    settings = FileTranscriptionSettings(windows_in_flight=in_flight)
    files = FileTranscriber(engine, worker, cast(Any, None), settings)
    windows = [Window(i * 10 * RATE, i * 10 * RATE + (i + 1) * RATE) for i in range(5)]

    async def plan(samples: object) -> list[Window]:
        return windows

    monkeypatch.setattr(files, "windows", plan)
    return files


async def test_windows_come_back_in_order_with_at_most_the_bound_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = LengthEngine()
    files = _files(engine, 2, monkeypatch)
    params = TranscriptionParams(model="whisper-1", prompt="Names: Kenobi.")
    audio = np.zeros(50 * RATE, dtype=np.float32)
    transcription = files.transcription(params.file_request())
    pieces = [piece async for piece in files.run(audio, transcription)]
    await files.worker.close()
    assert [p.index for p in pieces] == [0, 1, 2, 3, 4]
    assert [p.result.text for p in pieces] == [f" w{i + 1}. Done." for i in range(5)]
    assert max(len(call) for call in engine.calls) <= 2 and sum(len(c) for c in engine.calls) == 5
    assert all(r.prompt == "Names: Kenobi." and not r.prefix for call in engine.calls for r in call)
    result = transcription.transcript(pieces, 50.0)
    assert result.text == "w1. Done. w2. Done. w3. Done. w4. Done. w5. Done."
    assert [(s.start, s.end) for s in result.segments][:2] == [(0.0, 1.0), (10.0, 12.0)]
    assert result.segments[1].seek == 1000 and result.segments[1].avg_logprob == -0.2
    assert result.language == "english" and result.words is None
    assert result.prompt_tokens == len("Names: Kenobi.")


async def test_word_timestamps_are_asked_for_and_placed_in_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = LengthEngine()
    files = _files(engine, 4, monkeypatch)
    params = TranscriptionParams(model="m", response_format="verbose_json", timestamp_granularities=("word",))
    transcription = files.transcription(params.file_request())
    pieces = [piece async for piece in files.run(np.zeros(50 * RATE, dtype=np.float32), transcription)]
    await files.worker.close()
    assert all(r.word_times for call in engine.calls for r in call)
    words = transcription.transcript(pieces, 50.0).words
    assert words is not None
    assert [(w.word, w.start, w.end) for w in words[2:4]] == [("w2", 10.0, 10.5), ("Done", 10.5, 12.0)]


async def test_timed_formats_get_one_segment_per_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = LengthEngine()
    files = _files(engine, 4, monkeypatch)
    params = TranscriptionParams(model="m", response_format="srt")
    transcription = files.transcription(params.file_request())
    pieces = [piece async for piece in files.run(np.zeros(50 * RATE, dtype=np.float32), transcription)]
    await files.worker.close()
    assert all(r.word_times for call in engine.calls for r in call)
    segments = transcription.transcript(pieces, 50.0).segments
    assert [s.id for s in segments] == list(range(10))
    assert [(s.text, s.start, s.end, s.seek) for s in segments[2:4]] == [
        (" w2.", 10.0, 10.5, 1000),
        (" Done.", 10.5, 12.0, 1000),
    ]
