"""Uploaded files on the live sessions' ASR worker: windows at pauses, batched, in order.

This module only moves the work; what a file's windows ask of the engine and what their
results make is `sessions/file_transcription.py`. A file is decoded (`audio/files.py`, in a
thread), scored by the shared Silero model (in a thread), and cut at its pauses into windows
of at most ~30 s (`streaming/file_windows.py`). Every window is submitted to the transcription
service's `BatchingWorker` at `Priority.BULK`: windows of one file and of other files batch
together, and fill the slots live sessions' steps leave, but a call is always led by a live
step when one waits. Two bounds keep a flood of files from starving live sessions: at most
`max_concurrent` files run at once (`max_waiting` more wait; past that, 429), and at most
`windows_in_flight` windows of all files wait on the engine at any time, so a live step
never queues behind more than that many windows.

Windows are independent requests (no previous-window text as prompt) so that they can run
together; the client's prompt goes with each. Results come back in order as they finish.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import numpy as np
import numpy.typing as npt

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.vad import WINDOW_SAMPLES, SileroModel, speech_probabilities
from dragoman.config import FileTranscriptionSettings
from dragoman.engines.asr.base import ASREngine, StepRequest, StepResult
from dragoman.engines.workers import BatchingWorker, CancelToken, Priority
from dragoman.engines.workers.activity import ACTIVITY
from dragoman.errors import ClientError, InvalidValue
from dragoman.logs import get_logger
from dragoman.sessions.file_transcription import FileRequest, FileTranscription, WindowText
from dragoman.streaming.file_windows import Window, WindowPlan, plan_windows

log = get_logger(__name__)


class FilesBusy(ClientError):
    """Every file slot and every waiting place is taken; try again shortly (HTTP 429)."""

    code = "rate_limit_exceeded"
    status = 429


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

    def check(self, request: FileRequest) -> None:
        """Refuse what this engine cannot do before any work is spent on the file."""
        languages, language = self.engine.capabilities.languages, request.language
        if language and languages and language.strip().lower() not in languages:
            raise InvalidValue(
                f"Language {language[:16]!r} is not supported by {self.engine.name}.", param="language"
            )

    async def windows(self, samples: npt.NDArray[np.float32]) -> list[Window]:
        # Counted (`engines.workers.activity`): seconds of VAD over a long file.
        probs = await asyncio.to_thread(
            ACTIVITY.counted(lambda: speech_probabilities(self.vad_model, samples))
        )
        return plan_windows(probs, WINDOW_SAMPLES, len(samples), SAMPLE_RATE, self.plan)

    def transcription(self, request: FileRequest) -> FileTranscription:
        """A new file's transcription by this server's engine."""
        self._jobs += 1
        return FileTranscription(self.engine.name, self.engine.tokenizer, request, f"file-{self._jobs}")

    async def run(
        self, samples: npt.NDArray[np.float32], transcription: FileTranscription
    ) -> AsyncIterator[WindowText]:
        """Each window's text, in file order, as soon as it and those before it are done."""
        job = transcription.job
        windows = await self.windows(samples)
        log.info(
            "file transcription",
            job=job,
            seconds=round(len(samples) / SAMPLE_RATE, 2),
            windows=len(windows),
            speech_seconds=round(sum(w.end - w.start for w in windows) / SAMPLE_RATE, 2),
        )
        cancel = CancelToken()

        async def one(index: int, window: Window) -> StepResult:
            request = transcription.window_request(samples, index, window)
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
