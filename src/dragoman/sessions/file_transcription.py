"""One uploaded file's transcription, sans I/O: each window's engine request, and the
transcript (segments, words, language) from the windows' results.

The transport (`transports/file_transcription.py`) only moves the work: it decodes the file
and scores it with the VAD in threads (`audio.vad.speech_probabilities`), plans the windows
(`streaming/file_windows.py`), submits each window's request to the shared ASR worker, and
hands the results back here in file order. The protocol layer writes the transcript in the
response format asked for (`protocol/audio_transcriptions.py`).
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dragoman.audio.levels import even_levels
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.engines.asr.base import StepRequest, StepResult, TextTokenizer
from dragoman.errors import InvalidValue
from dragoman.languages import word_joiner
from dragoman.streaming.file_windows import Window, join_texts, sentences, timed_words

#: Whisper's mel frames per second: a segment's `seek` is its offset in them.
_FRAMES_PER_SECOND = 100


@dataclass(frozen=True)
class FileRequest:
    """What the transcription of one file is asked for, whatever the wire format."""

    language: str | None = None
    prompt: str | None = None
    #: Ask the engine where words start: for listed words and for sentence-timed segments.
    word_times: bool = False
    #: List the words with their times in the transcript.
    words: bool = False


@dataclass(frozen=True)
class Word:
    word: str
    start: float
    end: float


@dataclass(frozen=True)
class Segment:
    """One sentence of a window's text and where it lies in the file."""

    id: int
    start: float
    end: float
    text: str
    tokens: list[int] = field(default_factory=list)
    #: As the engine reports them (None where its backend gives none).
    avg_logprob: float | None = None
    no_speech_prob: float | None = None
    compression_ratio: float = 0.0
    #: The window's offset in the file, in Whisper's 10 ms mel frames.
    seek: int = 0
    temperature: float = 0.0


@dataclass(frozen=True)
class FileTranscript:
    text: str
    #: Whisper's name for the language ("english"), as OpenAI's verbose_json gives it.
    language: str
    duration: float
    segments: list[Segment]
    words: list[Word] | None = None
    output_tokens: int = 0
    prompt_tokens: int = 0


@dataclass(frozen=True)
class WindowText:
    """One window's transcript, in file order."""

    index: int
    window: Window
    result: StepResult


class FileTranscription:
    """The transcription of one file by one engine (named `engine_name`, with `tokenizer`)."""

    def __init__(self, engine_name: str, tokenizer: TextTokenizer, request: FileRequest, job: str) -> None:
        self.engine_name = engine_name
        self.tokenizer = tokenizer
        self.request = request
        self.job = job
        self.language = request.language.strip().lower() if request.language else None

    def window_request(self, samples: npt.NDArray[np.float32], index: int, window: Window) -> StepRequest:
        """The engine request of one window. Each speaker is brought to one level first:
        Whisper hears a quiet one next to a loud one as noise."""
        spans = [(start - window.start, end - window.start) for start, end in window.regions]
        return StepRequest(
            audio=even_levels(samples[window.start : window.end], spans),
            language=self.language,
            prompt=self.request.prompt,
            word_times=self.request.word_times,
            tags={"session": self.job, "window": str(index)},
        )

    def segments(self, piece: WindowText, first_id: int) -> list[Segment]:
        """A window's segments: its sentences, timed from the engine's word starts (one segment
        when it gave none). As in Whisper, the segments of one window share its `seek` and the
        scores of its decode."""
        result = piece.result
        start, end = piece.window.seconds(SAMPLE_RATE)
        starts = [(w.chars, w.seconds) for w in result.words]
        return [
            Segment(
                id=first_id + n,
                start=part.start,
                end=part.end,
                text=part.text,
                tokens=self.tokenizer.encode(part.text),
                avg_logprob=_rounded(result.avg_logprob),
                no_speech_prob=_rounded(result.no_speech_prob),
                compression_ratio=compression_ratio(result.text),
                seek=round(start * _FRAMES_PER_SECOND),
            )
            for n, part in enumerate(sentences(result.text, starts, start, end))
        ]

    def words(self, pieces: list[WindowText]) -> list[Word]:
        """Every window's words, timed in the file from the engine's word starts."""
        out: list[Word] = []
        for piece in pieces:
            result = piece.result
            if result.text.strip() and not result.words:
                raise InvalidValue(
                    f"Word timestamps are not available from {self.engine_name}; "
                    "use timestamp_granularities ['segment'].",
                    param="timestamp_granularities",
                )
            start, end = piece.window.seconds(SAMPLE_RATE)
            starts = [(w.chars, w.seconds) for w in result.words]
            out += [Word(w.word, w.start, w.end) for w in timed_words(result.text, starts, start, end)]
        return out

    def transcript(self, pieces: list[WindowText], duration: float) -> FileTranscript:
        """The whole file's transcript from its windows (in order)."""
        segments: list[Segment] = []
        for piece in pieces:
            segments += self.segments(piece, len(segments))
        spoken: Counter[str] = Counter()
        for piece in pieces:
            if piece.result.language:
                spoken[piece.result.language] += piece.window.end - piece.window.start
        code = spoken.most_common(1)[0][0] if spoken else (self.request.language or "")
        prompt = self.request.prompt
        return FileTranscript(
            text=join_texts([piece.result.text for piece in pieces]),
            language=language_name(code),
            duration=duration,
            segments=segments,
            words=self.words(pieces) if self.request.words else None,
            output_tokens=sum(len(s.tokens) for s in segments),
            prompt_tokens=len(self.tokenizer.encode(prompt)) if prompt else 0,
        )


def compression_ratio(text: str) -> float:
    """Whisper's repetition measure: UTF-8 bytes over their zlib-compressed bytes."""
    data = text.encode("utf-8")
    return round(len(data) / len(zlib.compress(data)), 3) if data else 0.0


def language_name(code: str | None) -> str:
    """Whisper's name of a language code ("en" -> "english"), as OpenAI's verbose_json gives it."""
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    if not code:
        return "unknown"
    names: dict[str, str] = LANGUAGES
    return names.get(code, code)


def delta_of(done: str, text: str) -> str:
    """What a window adds to the transcript so far (`done`), its joiner included."""
    piece = text.strip()
    return word_joiner(done, piece) + piece if piece else ""


def _rounded(value: float | None) -> float | None:
    """A score as reported; None (null on the wire) where the backend gives none."""
    return round(float(value), 4) if value is not None and np.isfinite(value) else None
