"""A file's transcription, sans I/O (sessions/file_transcription.py): the engine request of each
window, and the transcript its results make; no worker, no engine, no event loop."""

from __future__ import annotations

import numpy as np

from dragoman.engines.asr.base import StepResult, WordStart
from dragoman.protocol.audio_transcriptions import TranscriptionParams
from dragoman.sessions.file_transcription import FileTranscription, WindowText
from dragoman.streaming.file_windows import Window
from tests.unit.fakes import ByteTokenizer

RATE = 16_000


def transcription(**params: object) -> FileTranscription:
    asked = TranscriptionParams.model_validate({"model": "whisper-1", **params}).file_request()
    return FileTranscription("whisper-base", ByteTokenizer(), asked, "file-1")


def test_a_window_request_carries_the_windows_audio_evened_and_what_was_asked() -> None:
    loud_then_quiet = np.concatenate([np.full(RATE, 0.5), np.full(RATE, 0.005)]).astype(np.float32)
    window = Window(0, 2 * RATE, regions=((0, RATE), (RATE, 2 * RATE)))
    request = transcription(language=" EN ", prompt="Kenobi.", response_format="srt").window_request(
        loud_then_quiet, 3, window
    )
    assert request.language == "en" and request.prompt == "Kenobi." and request.word_times
    assert request.tags == {"session": "file-1", "window": "3"}
    # Each speaker brought to one level: the quiet second is no longer 40 dB below the first.
    first, second = (float(np.sqrt(np.mean(part**2))) for part in np.split(request.audio, 2))
    assert 0.5 < first / second < 2
    assert not transcription(response_format="json").window_request(loud_then_quiet, 0, window).word_times


def test_the_transcript_of_two_windows() -> None:
    pieces = [
        WindowText(
            0,
            Window(0, 2 * RATE),
            StepResult(" Hello there. Bye.", "en", words=(WordStart(0, 0.0), WordStart(13, 1.0))),
        ),
        WindowText(1, Window(10 * RATE, 12 * RATE), StepResult(" Again.", "en", words=(WordStart(0, 0.5),))),
    ]
    result = transcription(
        response_format="verbose_json", timestamp_granularities=["word", "segment"]
    ).transcript(pieces, 12.0)
    assert result.text == "Hello there. Bye. Again." and result.language == "english"
    assert [(s.text, s.start, s.end, s.seek) for s in result.segments] == [
        (" Hello there.", 0.0, 1.0, 0),
        (" Bye.", 1.0, 2.0, 0),
        (" Again.", 10.5, 12.0, 1000),
    ]
    assert result.words is not None and [w.word for w in result.words] == ["Hello", "there", "Bye", "Again"]
