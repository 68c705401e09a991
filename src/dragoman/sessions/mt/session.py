"""The sans-I/O state machine of one MT protocol v1 session (one WebSocket).

It keeps the session contract of `sessions/base.py`: events go in with `receive`,
events to send come out of `events_to_send`, and engine work is pulled with
`next_job` and reported with `job_done` / `job_failed` (and, for a streaming job's
passes, `job_progress`); the driver owns sockets, threads and the engine. Work
answered without the engine (the commit fast path, empty utterances, errors) is
answered inside `receive`. What a draft (or the commit fast path) commits is decided in
`sessions/mt/utterance.py`; the request of each draft is spelled out in `sessions/mt/requests.py`,
and an `init` is checked (or refused) in `sessions/mt/validation.py`.

Updates wait in `sessions/mt/update_queue.py` (one partial, latest wins, plus bounded
sticky finals) until the engine's turn comes. A final that arrives while a partial draft runs
has that draft end after its pass under way (`MTRequest.wrap_up`): the final drafts to the end.

Utterances: which update opens or closes which utterance is decided in
`sessions/mt/utterances.py`.

In the pause after an utterance closes, with nothing queued, the session asks the engine to
compute the next utterance's prompt up to its source (a PREFILL job), so that its first
update computes only its source words. Where the history window grew, that is the end of
the last turn and the next instruction (~20 tokens, ~60 ms of the 1.5B on 2 threads); where it
fell back (`history_window`), the prompt changes right after the system prompt and would
cost the first update ~300 tokens, 1.8 s (`bench.mt_history_reuse`;
bench/history/2026-12-06_speech.md). With no history the head is the one the last draft
began with, and none is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dragoman.engines.mt.base import DraftMode, MTDraft
from dragoman.errors import ClientError, DragomanError, ServerError, with_error_id
from dragoman.sessions.base import DEFAULT_LANE, CloseCode
from dragoman.sessions.mt.events import (
    ClientEvent,
    Error,
    ErrorCode,
    Init,
    InitOk,
    JobKind,
    MTJob,
    ServerEvent,
    Update,
)
from dragoman.sessions.mt.requests import DraftRequests
from dragoman.sessions.mt.update_queue import UpdateQueue
from dragoman.sessions.mt.utterance import (
    Decode,
    Utterance,
    advance,
    commit_cached,
    commit_partial,
    commit_streamed,
    copy_redraft,
    final_text,
)
from dragoman.sessions.mt.utterances import Utterances
from dragoman.sessions.mt.validation import SessionSetup, check_update, refusal, resolve_init
from dragoman.streaming.alignatt import AlignAttParams, Frontier

#: Finals that may wait for the engine at once (`MTSettings.max_queued_finals`).
MAX_QUEUED_FINALS = 16


class MTSession:
    def __init__(
        self,
        *,
        session_id: str,
        engine_name: str,
        directions: Sequence[str],
        decode: Decode,
        default_preset: str,
        max_utterance_words: int,
        presets: Mapping[str, AlignAttParams],
        max_queued_finals: int = MAX_QUEUED_FINALS,
        stream_commits: bool = False,
    ) -> None:
        """`stream_commits`: partial drafts are streaming jobs (`MTJob.streaming`), whose commits
        go out pass by pass; a consumer inside the server takes them (the interpreter), since
        MT protocol v1 answers each update once."""
        self.session_id = session_id
        self._stream_commits = stream_commits
        self._engine_name = engine_name
        self._directions = list(directions)
        self._decode = decode
        self._default_preset = default_preset
        self._max_words = max_utterance_words
        self._presets = presets
        #: Set when the connection should be closed once `events_to_send()` was sent.
        self._close_code: int | None = None
        self._outbox: list[ServerEvent] = []
        self._setup: SessionSetup | None = None
        self._queue = UpdateQueue(max_queued_finals)
        self._in_flight: MTJob | None = None
        self._last_seq: int | None = None
        self._last_clock: float | None = None
        self._utterances = Utterances()
        #: Counters for the session log: engine drafts, fast-path answers, streamed commits
        #: (and `stats`: coalesced partials).
        self._counts = {
            "drafts": 0,
            "fast_path": 0,
            "streamed": 0,
            "dropped_finals": 0,
            "copy_redrafts": 0,
            "wrapped_up": 0,
        }
        #: The job of a draft that copied the source, again with the target language forced;
        #: it runs before anything queued (`utterance.copy_redraft`).
        self._redraft: MTJob | None = None
        #: The requests of its drafts, once the session is initialised.
        self._requests: DraftRequests | None = None
        #: An utterance closed and the next has not opened: the next one's prompt head is due.
        self._prefill_due = False

    # -- the caller's interface ---------------------------------------------------

    @property
    def stats(self) -> dict[str, int]:
        """Counters for the session log."""
        return {**self._counts, "coalesced": self._queue.coalesced}

    @property
    def setup(self) -> SessionSetup | None:
        return self._setup

    def receive(self, event: ClientEvent) -> None:
        if isinstance(event, Init):
            self._on_init(event)
        else:
            self._on_update(event)
        self._pump()

    def events_to_send(self) -> list[ServerEvent]:
        out, self._outbox = self._outbox, []
        return out

    @property
    def close_code(self) -> int | None:
        return self._close_code

    @property
    def closed(self) -> bool:
        return self._close_code is not None

    def _can_plan(self) -> bool:
        return self._in_flight is None and self._redraft is None and bool(self._queue) and not self.closed

    def next_job(self, lane: str = DEFAULT_LANE) -> MTJob | None:
        """The engine call to make next (at most one at a time), or None.

        The driver asks for it when its turn on the engine comes, so the job is
        planned from the latest update: queued partials are coalesced, not drafted.
        """
        redraft = self._redraft
        if redraft is not None and self._in_flight is None and not self.closed:
            self._redraft, self._in_flight = None, redraft
            self._counts["drafts"] += 1
            return redraft
        while self._can_plan():
            job = self._plan_head()
            self._queue.pop()
            if job is not None:
                self._in_flight = job
                self._counts["drafts"] += 1
                return job
        return self._prefill()

    def _prefill(self) -> MTJob | None:
        """The PREFILL job, when it is due and nothing else is (see the module's docstring)."""
        due, self._prefill_due = self._prefill_due, False
        setup, utterances = self._setup, self._utterances
        if not due or setup is None or self._in_flight is not None or self._queue or self.closed:
            return None
        if utterances.open is not None or utterances.next_id is None or not setup.params.history_pairs:
            return None
        request = self._drafts().draft((), (), Utterance(utterances.next_id), DraftMode.PREFILL, 0)
        if not request.history:
            return None  # the head is the one the last draft began with
        self._in_flight = MTJob(
            self._last_seq or 0, utterances.next_id, JobKind.PREFILL, request, Frontier(0, 0)
        )
        return self._in_flight

    def job_progress(self, job: MTJob, draft: MTDraft) -> None:
        """A streaming job's draft so far (`MTJob.streaming`): what the policy commits of it goes
        out now, as a translation under the job's seq; the job's result goes on from there."""
        utt, setup = self._utterances.open, self._setup
        if job is not self._in_flight or job.kind is not JobKind.PARTIAL or utt is None or setup is None:
            return
        if utt.id != job.utterance_id or job.cancel.cancelled:
            return
        commit = commit_streamed(job, draft, utt, setup.params, setup.target_lang, self._decode)
        if commit is not None:
            self._outbox.append(
                advance(utt, job.seq, commit.committed, commit.buffer, commit.covered, commit.reason)
            )
            self._counts["streamed"] += 1

    def job_done(self, job: MTJob, draft: MTDraft) -> None:
        """Apply the engine's draft. Raises (state unchanged) on a malformed draft;
        the caller then reports `job_failed`."""
        if job is not self._in_flight:
            raise ValueError("job_done for a job that is not in flight")
        utt = self._utterances.open
        if job.kind is JobKind.PREFILL:
            pass  # nothing to answer: the engine's cache is the point
        elif utt is not None and utt.id == job.utterance_id:
            if job.kind is JobKind.PARTIAL:
                self._apply_partial(job, draft, utt)
            else:
                self._apply_final(job, draft, utt)
        self._in_flight = None
        self._pump()

    def job_failed(self, job: MTJob, error: DragomanError) -> None:
        """The engine call failed: the update is dropped (a final stays open for a retry)."""
        if job is self._in_flight:
            self._in_flight = None
            if self._utterances.open is not None:
                self._utterances.open.streamed = ()  # what its passes committed stands
        if job.cancel.cancelled or job.kind is JobKind.PREFILL:
            # A failed prefill answers no update: the next draft computes the head itself.
            self._pump()
            return
        if isinstance(error, ServerError):
            message = with_error_id("Translation failed and the update was dropped", error.error_id)
            error_id: str | None = error.error_id
        else:
            message, error_id = error.message, None
        self._outbox.append(Error(ErrorCode.PROCESSING_FAILED, message, seq=job.seq, error_id=error_id))
        self._pump()

    # -- client events ------------------------------------------------------------

    def _on_init(self, init: Init) -> None:
        if self._setup is not None:
            self._outbox.append(Error(ErrorCode.BAD_PROTOCOL, "the session is already initialized"))
            return
        try:
            setup = resolve_init(
                init,
                directions=self._directions,
                presets=self._presets,
                default_preset=self._default_preset,
            )
        except ClientError as exc:
            self._outbox.append(refusal(exc, self._directions))
            # "init_ok (or error, then closes)": a refused init is a policy violation.
            self._close_code = CloseCode.POLICY_VIOLATION
            return
        self._setup = setup
        self._requests = DraftRequests(self.session_id, setup, self._utterances)
        self._utterances.start(
            setup.history, setup.accepted_target_prefix, setup.source_lang, setup.target_lang
        )
        self._outbox.append(InitOk(setup.direction, setup.preset, self._engine_name))

    def _on_update(self, update: Update) -> None:
        if self._setup is None:
            self._outbox.append(Error(ErrorCode.BAD_PROTOCOL, "send init before any update", seq=update.seq))
            self._close_code = CloseCode.PROTOCOL_ERROR
            return
        try:
            check_update(update, last_seq=self._last_seq, last_clock_ms=self._last_clock)
        except ClientError as exc:
            self._outbox.append(Error(ErrorCode.BAD_PROTOCOL, exc.message, seq=update.seq))
            return
        self._last_seq, self._last_clock = update.seq, update.clock_ms
        if not self._queue.push(update):
            message = (
                f"{self._queue.max_finals} finals are still waiting to be translated and this one was "
                "dropped; send finals no faster than their translations come back."
            )
            self._outbox.append(Error(ErrorCode.PROCESSING_FAILED, message, seq=update.seq))
            self._counts["dropped_finals"] += 1
            # The client has closed that utterance all the same: its next one is welcome.
            self._utterances.dropped_final = update.utterance_id
            return
        job = self._in_flight
        if (
            update.is_final
            and job is not None
            and job.kind is JobKind.PARTIAL
            and not job.request.wrap_up.is_set()
        ):
            # The final pass drafts the utterance to its end at full quality: the partial
            # draft before it answers with what it has after the pass under way.
            job.request.wrap_up.set()
            self._counts["wrapped_up"] += 1

    # -- processing ---------------------------------------------------------------

    def _pump(self) -> None:
        """Answer queued updates that need no engine call, up to the first that does."""
        while self._can_plan():
            if self._plan_head() is not None:
                return
            self._queue.pop()

    def _plan_head(self) -> MTJob | None:
        try:
            return self._plan(self._queue.head)
        except Exception:
            # A bug must not wedge the queue: the update is dropped, the caller reports it.
            self._queue.pop()
            raise

    def _plan(self, update: Update) -> MTJob | None:
        """The engine call `update` needs, or None after answering it here.

        Planning the same head twice yields the same job and answers nothing twice,
        since everything answered here is popped by the caller.
        """
        setup = self._setup
        assert setup is not None
        utt = self._utterances.route(update)
        if not isinstance(utt, Utterance):
            self._outbox.append(utt)
            return None
        words = self._utterances.strip_carry_over(update)
        forced = not update.is_final and len(words) > self._max_words
        if update.is_final or forced:
            if not words:
                self._close(update.seq, utt, utt.committed, (), forced=False)
                return None
            request, frontier = self._drafts().final(update, words, utt)
            kind = JobKind.FORCED_FINAL if forced else JobKind.FINAL
            return MTJob(update.seq, utt.id, kind, request, frontier)
        if not words and not update.tail:
            self._outbox.append(advance(utt, update.seq, utt.committed, "", None, "alignatt:no_source"))
            return None
        request, frontier = self._drafts().partial(update, words, utt)
        commit = commit_cached(request, frontier, utt, setup.params, setup.target_lang)
        if commit is None:
            kind = JobKind.PARTIAL
            return MTJob(
                update.seq, update.utterance_id, kind, request, frontier, streaming=self._stream_commits
            )
        self._outbox.append(
            advance(utt, update.seq, commit.committed, commit.buffer, commit.covered, commit.reason)
        )
        self._counts["fast_path"] += 1
        return None

    def _drafts(self) -> DraftRequests:
        assert self._requests is not None, "planned only once initialised"
        return self._requests

    def _apply_partial(self, job: MTJob, draft: MTDraft, utt: Utterance) -> None:
        setup = self._setup
        assert setup is not None
        streamed = bool(utt.streamed)
        cut = commit_partial(job, draft, utt, setup.params, setup.target_lang, self._decode)
        # Its passes went out past the copy check's own look at the same draft (`commit_streamed`).
        if not streamed and self._copied(job, draft, utt):
            utt.cache = None
            return
        self._outbox.append(advance(utt, job.seq, cut.committed, cut.buffer, cut.covered, cut.reason))

    def _apply_final(self, job: MTJob, draft: MTDraft, utt: Utterance) -> None:
        text = final_text(draft, utt, self._decode)
        if self._copied(job, draft, utt):
            return
        words = tuple(job.request.source_words)
        self._close(job.seq, utt, text, words, forced=job.kind is JobKind.FORCED_FINAL)

    def _copied(self, job: MTJob, draft: MTDraft, utt: Utterance) -> bool:
        """Whether the draft repeats the source; then nothing of it is used and the job runs
        again, first, with the target language forced (`utterance.copy_redraft`)."""
        setup = self._setup
        assert setup is not None
        redraft = copy_redraft(job, draft, utt, setup.target_lang, self._decode)
        if redraft is None:
            return False
        self._redraft = redraft
        self._counts["copy_redrafts"] += 1
        return True

    def _close(self, seq: int, utt: Utterance, text: str, words: tuple[str, ...], *, forced: bool) -> None:
        covered = len(words) if words else utt.covered
        self._outbox.append(advance(utt, seq, text, "", covered, "final", final=True, forced=forced))
        self._utterances.close(utt, words, forced=forced)
        self._prefill_due = True
