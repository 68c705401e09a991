"""The streaming transcript of each item: its steps, and what their results say.

Decoding re-transcribes the item every `chunk_seconds` of new audio "as one engine
request whose assistant turn is prefilled with the previous hypothesis minus its
last unfixed_tokens tokens (once unfixed_chunks chunks are in), so the tail can
still be revised while the head is fixed". The driver runs the jobs in a task of
its own, so audio that arrives during a step is coalesced into the next one rather
than decoded inside the receive loop. A committed item is decoded once more, whole,
by a final step that completes it.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.engines.asr.base import StepRequest, StepResult
from dragoman.engines.workers import CancelToken, JobCancelled, Priority
from dragoman.errors import DragomanError
from dragoman.sessions.base import Observation
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.events import (
    Completed,
    Delta,
    Error,
    Failed,
    FrontEvent,
    Partial,
    Provisional,
)
from dragoman.sessions.speech.item import Item
from dragoman.streaming.sealing import SealPolicy, choose_seal
from dragoman.streaming.stable_prefix import agreed_prefix, stable_prefix

#: Observed (`Observation`) for each partial step skipped under load, its audio decoded by the next.
STEPS_COALESCED = "transcription_steps_coalesced"

#: A language detected on less audio than this is detected again by the next step, and
#: nothing heard in it is forced or sent. Measured with whisper-base choosing among en, de, it
#: and zh on the 36 eval clips in those languages: 26 right on their first 1.5 s, 31 on 2.5 s,
#: 35 on 4 s (German and Mandarin were heard as English on short windows). With the default
#: 2 s chunks the second step, the first whose text is sent, settles it: no delta is later.
LANGUAGE_SETTLES_SECONDS = 3.5
#: ... unless the engine is this sure of it on at least this much audio. The interpreter's
#: first stable text comes at 2.4 s (three 0.8 s steps), and waiting for 3.5 s would hold it
#: back 1.6 s. Measured with whisper-base among en, de, it and zh on the 38 eval clips in
#: those languages, each from its first speech: at 2.4 s, 27 detections were >= 0.8 (17 of the
#: 22 English clips), all right, and the wrong ones had at most 0.64; at 1.6 s a Mandarin clip
#: was heard as English with 0.96, so no shorter window is trusted.
LANGUAGE_SURE_SECONDS = 2.4
LANGUAGE_SURE_PROBABILITY = 0.8


@dataclass(frozen=True)
class StepJob:
    """One engine request for one item; `final` when it finishes the item."""

    item: Item
    request: StepRequest
    final: bool
    #: The item's clock when the job was made: audio after it is pending for the next step.
    clock: int
    #: Set when the item is cleared: a step not yet started is then dropped.
    cancel: CancelToken = field(default_factory=CancelToken, compare=False)
    priority: Priority = Priority.STREAMING
    #: The early start's whole decode of a turn at a pause (`Provisional`), and the item's
    #: `resumes` then: speech that came back since makes its transcript stale.
    provisional: bool = False
    resumes: int = 0


class ItemDecoder:
    """Steps for the open item and the committed ones, at most one in flight at a time."""

    def __init__(
        self,
        session_id: str,
        engine: EngineProfile,
        config: SessionConfig,
        emit: Callable[[FrontEvent], None],
        observe: Callable[[Observation], None] = lambda observation: None,
    ) -> None:
        self.session_id = session_id
        self.engine = engine
        #: The session's config; the speech front sets it again on every change.
        self.config = config
        self._emit = emit
        self._observe = observe
        #: Committed items waiting for their final step, oldest first.
        self.committed: deque[Item] = deque()
        self._in_flight: StepJob | None = None
        #: Steps, over all items, whose firm text contradicted deltas already sent.
        self.revisions = 0
        #: Steps skipped under load, their audio decoded by the next one (`coalesce`).
        self.coalesced = 0

    def drop(self, item: Item) -> None:
        """The client cleared `item`: a step of it that has not started is cancelled."""
        item.dropped = True
        in_flight = self._in_flight
        if in_flight is not None and in_flight.item is item:
            in_flight.cancel.cancel()  # its result would be dropped anyway

    def commit(self, item: Item) -> None:
        """`item` is closed and waits for its final step.

        A partial step of it that has not started is cancelled: the final decodes all its
        audio anyway, and without the partial ahead of it the final can join the engine's
        next call instead of the one after (one step less to wait for under load).
        """
        self.committed.append(item)
        job = self._in_flight
        if job is not None and job.item is item and not job.final and not job.provisional:
            job.cancel.cancel()

    def pause(self, item: Item) -> None:
        """A silence began in the open `item` (the early start): decode it whole now.

        A partial step of it that has not started is cancelled, as at a commit: the pause's
        decode hears all its audio, and must not queue behind a step that hears less.
        """
        item.provisional = True
        job = self._in_flight
        if job is not None and job.item is item and not job.final and not job.provisional:
            job.cancel.cancel()

    def resume(self, item: Item) -> None:
        """Speech came back in the open `item`: a pause's decode of it is stale (one that has
        not started is cancelled) and its transcript, if out, no longer stands."""
        item.provisional = False
        item.resumes += 1
        job = self._in_flight
        if job is not None and job.item is item and job.provisional:
            job.cancel.cancel()

    def next_job(self, item: Item | None) -> StepJob | None:
        """The next engine request to run, the open `item`'s or a committed one's, or None;
        at most one is in flight per session."""
        if self._in_flight is not None:
            return None
        while self.committed and (
            self.committed[0].dropped or self._complete_from_last_step(self.committed[0])
        ):
            pass
        if self.committed:
            job = self._job(self.committed[0], final=True)
        elif item is not None and item.provisional:
            item.provisional = False
            job = dataclasses.replace(self._job(item, final=False), provisional=True, resumes=item.resumes)
        elif item is not None and item.clock - item.decoded_clock >= self.chunk_samples:
            # All pending audio goes in one step, however many chunks it completes.
            job = self._job(item, final=False)
        else:
            return None
        self._in_flight = job
        return job

    def _complete_from_last_step(self, item: Item) -> bool:
        """Complete a committed item whose last step already heard all of its speech.

        A commit right after a chunk boundary would otherwise decode the same audio twice;
        and a turn that server_vad ends after the early start's decode at its pause would
        wait for a second decode of the same speech and the silence after it: the final
        transcript is the turn's answer's last wait.
        """
        if not item.decoded_whole():
            return False
        text = item.transcript()
        self._send_delta(item, text)
        self._completed(item, text)
        return True

    @property
    def seal_policy(self) -> SealPolicy:
        return SealPolicy.for_window(self.config.max_window_seconds)

    @property
    def chunk_samples(self) -> int:
        return round(self.config.chunk_seconds * SAMPLE_RATE)

    def _language(self, item: Item) -> str | None:
        """The language the item is decoded in: the session's, or the one detected for it
        once settled; None while it is (still) to be detected."""
        return self.config.language or (item.language if item.language_settled else None)

    def _forced(self, item: Item) -> bool:
        """Whether the item's stable prefix is forced (and so firm): after unfixed_chunks
        steps (or once two steps agreed, `_agrees_early`), in a language that no longer changes."""
        settled = self.config.language is not None or item.language_settled
        return (item.steps >= self.config.unfixed_chunks or item.agreed) and settled

    def _job(self, item: Item, final: bool) -> StepJob:
        prefix = item.raw_prefix if self._forced(item) else ""
        audio = item.window_audio()
        policy = self.seal_policy
        request = StepRequest(
            audio=audio,
            prefix=prefix,
            language=self._language(item),
            detect_among=self.config.detect_among,
            prompt=item.prompt(self.engine.tokenizer, self.config.prompt),
            scope=self.config.asr_scope,
            # Word starts are needed only where a cut may be made.
            word_times=not final and policy.enabled and len(audio) >= policy.min_window_seconds * SAMPLE_RATE,
            tags={"session": self.session_id, "item": item.item_id},
        )
        # A committed item's final step is what its client waits on (`.completed`, or the
        # agent's answer): it leads the engine's next call, in a short call of its own.
        priority = Priority.INTERACTIVE if final else Priority.STREAMING
        return StepJob(item=item, request=request, final=final, clock=item.clock, priority=priority)

    def job_done(self, job: StepJob, result: StepResult) -> None:
        self._finish_job(job)
        item = job.item
        if item.dropped:
            return
        earlier, item.raw = item.raw, result.text
        if job.request.language is None:
            item.language = result.language or item.language
            seconds = len(job.request.audio) / SAMPLE_RATE
            item.language_settled = (
                job.final
                or result.language is None  # the engine does not say: nothing to wait for
                or len(self.engine.capabilities.languages) == 1
                or seconds >= LANGUAGE_SETTLES_SECONDS
                or (
                    seconds >= LANGUAGE_SURE_SECONDS
                    and (result.language_probability or 0.0) >= LANGUAGE_SURE_PROBABILITY
                )
            )
        item.steps += 1
        item.decoded_clock = job.clock
        item.decoded_samples = item.window_start + len(job.request.audio)
        if job.provisional:
            item.paused_at = job.resumes
        item.raw_prefix = stable_prefix(item.raw, self.engine.tokenizer, self.config.unfixed_tokens)
        forced = job.request.prefix
        if len(forced) > len(item.raw_prefix) and item.raw.startswith(forced):
            # A step that added fewer than unfixed_tokens tokens (a pause) keeps what it was
            # forced to: that text went out as deltas, and no later step may contradict it.
            item.raw_prefix = forced
        if self._agrees_early(job, item, earlier):
            item.raw_prefix = agreed_prefix(earlier, item.raw)
            item.agreed = bool(item.raw_prefix)
        if not job.final:
            # Only text forced in this step (stable for a step already) and still stable is sealed.
            stable = min(len(job.request.prefix), len(item.raw_prefix))
            seal = choose_seal(
                item.raw, stable, result.words, job.request.audio, SAMPLE_RATE, self.seal_policy
            )
            if seal is not None:
                item.seal(seal)
        text = item.transcript()
        if job.final:
            self._send_delta(item, text)
            self._completed(item, text)
            return
        # Only text the next step will force is firm enough to send as a delta.
        firm = item.firm(forced=self._forced(item))
        self._send_delta(item, firm)
        if job.provisional and not item.closed and job.resumes == item.resumes:
            item.speculated = True
            self._emit(Provisional(item.item_id, text))
        self._emit(
            Partial(
                item_id=item.item_id,
                text=text,
                stable_chars=len(firm),
                audio_seconds=round(job.clock / SAMPLE_RATE, 3),
                language=self._language(item),
            )
        )

    def _agrees_early(self, job: StepJob, item: Item, earlier: str) -> bool:
        """Whether this step may firm up what it and the step before agree on (`agree_early`): a
        partial step before unfixed_chunks, in the session's fixed language (one being detected
        may change between the two steps). One short decode alone mishears a phrase's start;
        two that say it alike seldom do."""
        return (
            self.config.agree_early
            and not job.final
            and not item.agreed
            and 2 <= item.steps < self.config.unfixed_chunks
            and self.config.language is not None
            and bool(earlier)
        )

    def coalesce(self, item: Item | None) -> None:
        """Skip a partial step of the open `item` that has not started by the time a whole
        chunk more has come.

        Under load a step waits for the engine while the audio goes on; its partial, when
        it came, would already be a chunk behind. The step is cancelled instead (it is
        dropped if its call has not started, and runs as usual if it has), and the next
        one decodes its audio and the new chunk together.
        """
        job = self._in_flight
        if job is None or item is None or job.item is not item or job.final or job.provisional:
            return
        if not job.cancel.cancelled and item.clock - job.clock >= self.chunk_samples:
            job.cancel.cancel()

    def job_failed(self, job: StepJob, error: DragomanError) -> None:
        """A step failed; the session goes on. A failed final step fails the item."""
        self._finish_job(job)
        item = job.item
        if item.dropped:
            return
        if isinstance(error, JobCancelled) and job.cancel.cancelled and not job.final:
            if not job.provisional:  # a pause's decode made stale by speech is no skipped step
                self.coalesced += 1  # skipped (`coalesce`, `pause`): the next step takes its audio
                self._observe(Observation(STEPS_COALESCED))
            return
        # Don't retry the same audio at once; the next chunk (or the commit) tries again.
        item.decoded_clock = job.clock
        if job.final:
            self.committed.popleft()
            self._emit(Failed(item_id=item.item_id, error=error))
        else:
            self._emit(Error(error))

    def _finish_job(self, job: StepJob) -> None:
        if self._in_flight is not job:
            raise RuntimeError("job_done/job_failed for a job that is not in flight")
        self._in_flight = None

    def _send_delta(self, item: Item, firm: str) -> None:
        delta = item.ledger.advance(firm)
        if delta:
            self._emit(Delta(item_id=item.item_id, delta=delta))

    def _completed(self, item: Item, transcript: str) -> None:
        self.committed.popleft()
        self.revisions += item.ledger.revisions
        self._emit(
            Completed(
                item_id=item.item_id,
                transcript=transcript,
                seconds=round(item.samples / SAMPLE_RATE, 3),
                language=item.language,
            )
        )
