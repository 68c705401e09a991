"""Uploaded files on the live sessions' ASR worker: windows at pauses, batched, in order.

A file is decoded (`audio/files.py`, in a thread), scored by the shared Silero model (in a
thread), and cut at its pauses into windows of at most ~30 s (`streaming/file_windows.py`).
Every window is submitted to the transcription service's `BatchingWorker` at
`Priority.BULK`: windows of one file and of other files batch together, and fill the
slots live sessions' steps leave, but a call is always led by a live step when one waits.
Two bounds keep a flood of files from starving live sessions: at most `max_concurrent`
files run at once (`max_waiting` more wait; past that, 429), and at most
`windows_in_flight` windows of all files wait on the engine at any time, so a live step
never queues behind more than that many windows.

Windows are independent requests (no previous-window text as prompt) so that they can run
together; the client's prompt goes with each. Results come back in order as they finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dragoman.audio.levels import even_levels
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.vad import WINDOW_SAMPLES, SileroModel, SileroVAD
from dragoman.config import FileTranscriptionSettings
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.workers import BatchingWorker, CancelToken, Priority
from dragoman.errors import ClientError, InvalidValue
from dragoman.logs import get_logger
from dragoman.protocol.audio_transcriptions import FileTranscript, Segment, TranscriptionParams, Word
from dragoman.streaming.file_windows import (
    Window,
    WindowPlan,
    join_texts,
    joiner,
    plan_windows,
    sentences,
    timed_words,
)

log = get_logger(__name__)

#: Whisper's mel frames per second: a segment's `seek` is its offset in them.
_FRAMES_PER_SECOND = 100


class FilesBusy(ClientError):
    """Every file slot and every waiting place is taken; try again shortly (HTTP 429)."""

    code = "rate_limit_exceeded"
    status = 429


@dataclass(frozen=True)
class WindowText:
    """One window's transcript, in file order."""

    index: int
    window: Window
    result: StepResult


class Admission:
    """At most `concurrent` jobs at once and `waiting` more in line; past that, `FilesBusy`."""

    def __init__(self, concurrent: int, waiting: int) -> None:
        self._slots = asyncio.Semaphore(concurrent)
        self._max_waiting = waiting
        self.waiting = 0

    async def acquire(self) -> Callable[[], None]:
        """Wait for a slot; returns its release, which may be called more than once."""
        if self._slots.locked() and self.waiting >= self._max_waiting:
            raise FilesBusy("The server is transcribing as many files as it takes; retry in a moment.")
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._slots.release()

        return release


def speech_probabilities(model: SileroModel, samples: npt.NDArray[np.float32]) -> list[float]:
    """Silero's speech probability of each 32 ms frame of a whole file (blocking: a thread).

    The VAD's state starts afresh after every half second of quiet (`SileroVAD`):
    carried across a whole 10-minute file of eval recordings, it heard 11 % of the frames of
    a FLEURS recording 40 dB below its neighbours as speech (85 % alone).
    """
    vad = SileroVAD(model)
    whole = len(samples) // WINDOW_SAMPLES
    probs = [vad(samples[i * WINDOW_SAMPLES : (i + 1) * WINDOW_SAMPLES]) for i in range(whole)]
    rest = samples[whole * WINDOW_SAMPLES :]
    if len(rest):  # the last, partial frame, padded with silence (no copy of the whole file)
        probs.append(vad(np.pad(rest, (0, WINDOW_SAMPLES - len(rest)))))
    return probs


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


class FileTranscriber:
    """The file jobs of one server, over the transcription service's engine and worker."""

    def __init__(
        self,
        engine: ASREngine,
        worker: BatchingWorker[StepRequest, StepResult],
        vad_model: SileroModel,
        settings: FileTranscriptionSettings,
    ) -> None:
        self.engine = engine
        self.worker = worker
        self.vad_model = vad_model
        self.settings = settings
        self.admission = Admission(settings.max_concurrent, settings.max_waiting)
        self._windows = asyncio.Semaphore(settings.windows_in_flight)
        self.plan = WindowPlan(
            max_window_s=min(settings.window_seconds, engine.capabilities.max_audio_seconds)
        )
        self._jobs = 0

    def check(self, params: TranscriptionParams) -> None:
        """Refuse what this engine cannot do before any work is spent on the file."""
        languages = self.engine.capabilities.languages
        if params.language and languages and params.language.strip().lower() not in languages:
            raise InvalidValue(
                f"Language {params.language[:16]!r} is not supported by {self.engine.name}.", param="language"
            )

    async def windows(self, samples: npt.NDArray[np.float32]) -> list[Window]:
        probs = await asyncio.to_thread(speech_probabilities, self.vad_model, samples)
        return plan_windows(probs, WINDOW_SAMPLES, len(samples), SAMPLE_RATE, self.plan)

    async def run(
        self, samples: npt.NDArray[np.float32], params: TranscriptionParams
    ) -> AsyncIterator[WindowText]:
        """Each window's text, in file order, as soon as it and those before it are done."""
        self._jobs += 1
        job = f"file-{self._jobs}"
        windows = await self.windows(samples)
        log.info(
            "file transcription",
            job=job,
            seconds=round(len(samples) / SAMPLE_RATE, 2),
            windows=len(windows),
            speech_seconds=round(sum(w.end - w.start for w in windows) / SAMPLE_RATE, 2),
        )
        cancel = CancelToken()
        language = params.language.strip().lower() if params.language else None

        async def one(index: int, window: Window) -> StepResult:
            # Each speaker at one level: Whisper hears a quiet one next to a loud one as noise.
            spans = [(start - window.start, end - window.start) for start, end in window.regions]
            request = StepRequest(
                audio=even_levels(samples[window.start : window.end], spans),
                language=language,
                prompt=params.prompt,
                word_times=wants_word_times(params),
                tags={"session": job, "window": str(index)},
            )
            async with self._windows:
                return await self.worker.submit(request, cancel, Priority.BULK)

        tasks = [asyncio.create_task(one(i, w), name=f"{job}-{i}") for i, w in enumerate(windows)]
        try:
            for index, (window, task) in enumerate(zip(windows, tasks, strict=True)):
                yield WindowText(index, window, await task)
        finally:
            cancel.cancel()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task

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
                tokens=self.engine.tokenizer.encode(part.text),
                avg_logprob=_rounded(result.avg_logprob),
                no_speech_prob=_rounded(result.no_speech_prob),
                compression_ratio=compression_ratio(result.text),
                seek=round(start * _FRAMES_PER_SECOND),
            )
            for n, part in enumerate(sentences(result.text, starts, start, end))
        ]

    def transcript(
        self, pieces: list[WindowText], duration: float, params: TranscriptionParams
    ) -> FileTranscript:
        """The whole file's transcript from its windows (in order)."""
        segments: list[Segment] = []
        for piece in pieces:
            segments += self.segments(piece, len(segments))
        text = join_texts([piece.result.text for piece in pieces])
        spoken: Counter[str] = Counter()
        for piece in pieces:
            if piece.result.language:
                spoken[piece.result.language] += piece.window.end - piece.window.start
        code = spoken.most_common(1)[0][0] if spoken else (params.language or "")
        return FileTranscript(
            text=text,
            language=language_name(code),
            duration=duration,
            segments=segments,
            words=self.words(pieces) if "word" in params.timestamp_granularities else None,
            output_tokens=sum(len(s.tokens) for s in segments),
            prompt_tokens=len(self.engine.tokenizer.encode(params.prompt)) if params.prompt else 0,
        )

    def words(self, pieces: list[WindowText]) -> list[Word]:
        """Every window's words, timed in the file from the engine's word starts."""
        out: list[Word] = []
        for piece in pieces:
            result = piece.result
            if result.text.strip() and not result.words:
                raise InvalidValue(
                    f"Word timestamps are not available from {self.engine.name}; "
                    "use timestamp_granularities ['segment'].",
                    param="timestamp_granularities",
                )
            start, end = piece.window.seconds(SAMPLE_RATE)
            starts = [(w.chars, w.seconds) for w in result.words]
            out += [Word(w.word, w.start, w.end) for w in timed_words(result.text, starts, start, end)]
        return out


def wants_word_times(params: TranscriptionParams) -> bool:
    """Whether the engine is asked where words start: for `words`, and for formats whose
    segments are timed (srt, vtt, verbose_json), which are cut into sentences with them."""
    if "word" in params.timestamp_granularities or params.response_format in ("srt", "vtt"):
        return True
    return params.response_format == "verbose_json" and params.wants_segments


def delta_of(done: str, text: str) -> str:
    """What a window adds to the transcript so far (`done`), its joiner included."""
    piece = text.strip()
    return joiner(done, piece) + piece if piece else ""


def _rounded(value: float | None) -> float | None:
    """A score as reported; None (null on the wire) where the backend gives none."""
    return round(float(value), 4) if value is not None and np.isfinite(value) else None
