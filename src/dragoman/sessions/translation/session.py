"""The translation session (OpenAI's Realtime translation): a sans-I/O state machine.

It keeps the session contract of `sessions/base.py` and composes three sub-machines:

- the speech front (`sessions/speech/front.py`): the input audio, cut into segments by
  the VAD (server_vad's turns) and transcribed as it grows, on the ASR lane;
- the translator (`translator.py`): each segment's transcript as MT protocol v1 updates
  into an `MTSession` (AlignAtt, the commit fast path, the sticky final), on the MT lane;
- the spoken output (`speech_out.py`): each newly committed piece of the translation,
  spoken by the target language's voice clause by clause, on the TTS lane.

OpenAI: "Translation starts from the audio stream itself. Keep appending audio, including
silence between phrases" - there are no turns, items or responses on the wire, only
deltas, each with `elapsed_ms` on the input stream's clock in 200 ms steps.
`session.close` flushes the input: the open segment is committed, and once its
translation has been said, `session.closed` goes out and the connection closes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from dragoman.audio.vad import SpeechProbability
from dragoman.engines.asr.base import StepResult
from dragoman.engines.mt.base import MTDraft
from dragoman.errors import ClientError, DragomanError, InvalidValue
from dragoman.languages import is_unsegmented, word_joiner
from dragoman.sessions.agent.jobs import ASR, TTS
from dragoman.sessions.base import CloseCode, Observation
from dragoman.sessions.mt.events import JobKind, MTJob
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import STEPS_COALESCED, StepJob
from dragoman.sessions.speech.front import SpeechFront
from dragoman.sessions.translation.config import Languages, TranslationConfig, check_model, checked
from dragoman.sessions.translation.events import (
    AppendAudio,
    ClientEvent,
    CloseSession,
    Error,
    InputTranscriptDelta,
    OutputTranscriptDelta,
    ServerEvent,
    SessionClosed,
    SessionConfigured,
    UpdateSession,
)
from dragoman.sessions.translation.speech_out import SpeakJob, SpokenOutput, on_grid
from dragoman.sessions.translation.timeline import Timeline
from dragoman.sessions.translation.translator import MTProfile, Translator

MT = "mt"
LANES = (ASR, MT, TTS)

#: What the session observes for the server's metrics (`Observation`, recorded by the driver):
#: seconds of audio taken and spoken, and each segment's lags on the input clock, in seconds.
INPUT_SECONDS = "translation_input_seconds"
OUTPUT_SECONDS = "translation_output_seconds"
FIRST_TEXT_SECONDS = "translation_first_text_seconds"
END_LAG_SECONDS = "translation_end_lag_seconds"

TranslationJob = StepJob | MTJob | SpeakJob
#: A step's transcript, a draft, nothing for TTS.
TranslationResult = StepResult | MTDraft | None


class TranslationSession:
    def __init__(
        self,
        session_id: str,
        *,
        model: str,
        model_names: frozenset[str] = frozenset(),
        expires_at: int,
        config: TranslationConfig,
        languages: Languages,
        asr: EngineProfile,
        speech: SessionConfig,
        mt: MTProfile,
        voices: Callable[[str], str],
        vad_factory: Callable[[], SpeechProbability] | None,
        media_track: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`model`: the name the session was opened with; `model_names`: the names of the same
        model (an update may repeat any). `speech`: the speech front's settings (24 kHz input,
        server_vad, the source language); `voices`: the voice name for a target language
        (InvalidValue when none speaks it). `media_track`: the audio comes from a WebRTC call's
        track, which runs on after `session.close`; what it sends then is dropped, not refused.
        `clock`: seconds since the epoch, against `expires_at`."""
        self.session_id = session_id
        self.media_track = media_track
        self.model = model
        self._model_names = model_names | {model}
        self.expires_at = expires_at
        self._clock = clock
        self.languages = languages
        self._asr_name = asr.name
        self._voices = voices
        self._events: list[ServerEvent] = []
        self._observations: list[Observation] = []
        #: Each segment's milestones, for the service's log and the lag metrics (`timeline.py`).
        self.timeline = Timeline()
        #: ASR steps skipped under load, their audio decoded by the next one.
        self.steps_coalesced = 0
        # The early start (as the voice agent's) decodes a segment whole the moment a silence
        # begins in it: when the silence ends the segment, that decode is its final transcript
        # and MT's final pass starts at once, with no ASR step to wait for. FLEURS en->de on an
        # Intel Xeon (2026-12-05, two runs each): end lag mean 2.32 / 2.33 -> 2.04 / 2.02 s at 1
        # session, 3.56 / 3.85 -> 3.35 / 3.26 s at 2; first text p50 the same at 1 session,
        # 3.58 / 3.62 -> 3.77 / 3.86 s at 2 (one clip of five, beside a long one, 2.9 -> 3.8 s).
        self.front = SpeechFront(session_id, asr, speech, vad_factory, self._heard, early_start=True)
        self.translator = Translator(session_id, mt, languages, self._translated, self._error)
        self.speech = SpokenOutput(self._events.append)
        self.config = checked(config, config.language, languages, voices)
        self.translator.target = self.config.language
        self._follow_noise_reduction()
        #: The item whose source text went out last.
        self._input_item: str | None = None
        #: The last character of source text sent: a segment's text joins it with a space, or,
        #: in a script written without spaces, none (`languages.word_joiner`).
        self._input_tail = ""
        self._said_output = False
        #: Segments committed and not yet transcribed in full.
        self._transcribing = 0
        self._closing = False
        self._close_code: int | None = None
        self._created_at = int(clock())
        #: The session hit its `expires_at`.
        self._ended = False
        self._emit(self._configured(created=True))

    # -- events in ---------------------------------------------------------------------

    def receive(self, event: ClientEvent) -> None:
        """Handle one client event; a client fault becomes an `error` event and changes nothing."""
        if self._expired():
            return
        try:
            if isinstance(event, AppendAudio):
                if self._closing and self.media_track:
                    return
                self._refuse_after_close("audio")
                before = self.front.input_seconds
                self.front.append(event.audio)
                self._observe(INPUT_SECONDS, self.front.input_seconds - before)
            elif isinstance(event, UpdateSession):
                self._refuse_after_close("session.update")
                self._update(event.values)
            elif isinstance(event, CloseSession):
                self._refuse_after_close("session.close")
                self._close()
            else:  # Rejected: only its error goes out, in order with the rest
                self._emit(Error(event.error, event.event_id))
        except ClientError as exc:
            self._emit(Error(exc, event.event_id))
        self._maybe_closed()

    def _expired(self) -> bool:
        """Whether the session is past its `expires_at`: then it ends with an `error` at once."""
        if self._ended:
            return True
        if self._close_code is not None or self._clock() < self.expires_at:
            return False
        # OpenAI ends a Realtime session at its maximum duration with `session_expired`.
        minutes = max(1, round((self.expires_at - self._created_at) / 60))
        self._emit(
            Error(
                InvalidValue(
                    f"Your session hit the maximum duration of {minutes} minutes.", code="session_expired"
                )
            )
        )
        self._closing = self._ended = True
        self.speech.cancel()
        self._close_code = CloseCode.NORMAL
        return True

    def _refuse_after_close(self, what: str) -> None:
        if self._closing:
            raise InvalidValue(
                f"The session is closing (session.close was sent): {what} is no longer taken.",
                code="session_closed",
            )

    def _update(self, values: Mapping[str, Any]) -> None:
        """Apply an update, all or nothing; a new language applies from the next segment."""
        check_model(values.get("model"), self.model, self._model_names)
        new = self.config.patched(values)
        new = checked(new, values.get("language", new.language), self.languages, self._voices)
        self.config = new
        self.translator.target = new.language
        self._follow_noise_reduction()
        self._emit(self._configured(created=False))

    def _follow_noise_reduction(self) -> None:
        """The speech front filters the input as `noise_reduction` says, from the next append on."""
        front = self.front
        if front.config.noise_reduction != self.config.noise_reduction:
            front.reconfigure(dataclasses.replace(front.config, noise_reduction=self.config.noise_reduction))

    def _close(self) -> None:
        """Flush the input: the open segment is committed, then translated and said."""
        self._closing = True
        if self.front.current_item is not None or not self.front.buffer_empty():
            # An empty buffer (nothing said) raises: there is nothing to flush then.
            with contextlib.suppress(InvalidValue):
                self.front.commit()

    @property
    def input_seconds(self) -> float:
        return self.front.input_seconds

    @property
    def stats(self) -> dict[str, int]:
        """Counters for the session's closing log line: its MT sessions' (drafts, streamed
        commits, coalesced updates, ...) and the ASR steps skipped under load."""
        return {**self.translator.stats, "asr_steps_coalesced": self.steps_coalesced}

    def refuse_audio(self, refused: bool) -> None:
        self.front.audio_refused = refused

    @property
    def clock_ms(self) -> float:
        """The input stream's clock: audio taken so far, in ms."""
        return self.front.input_seconds * 1000

    # -- the speech front's events ----------------------------------------------------

    def _heard(self, event: speech.FrontEvent) -> None:
        self.timeline.heard(event, self.clock_ms)
        if isinstance(event, speech.Partial):
            self.translator.partial(
                event.item_id, event.text, event.stable_chars, self.clock_ms, event.language
            )
        elif isinstance(event, speech.Delta):
            self._source_text(event.item_id, event.delta)
        elif isinstance(event, speech.Committed):
            self._transcribing += 1
        elif isinstance(event, speech.SpeechStarted):
            self.translator.begin(event.item_id)
        elif isinstance(event, speech.Completed):
            self._transcribing -= 1
            self.translator.final(event.item_id, event.transcript, self.clock_ms, event.language)
        elif isinstance(event, speech.Failed):
            self._transcribing -= 1
            self.translator.abandon(event.item_id)
            self._emit(Error(event.error))
        elif isinstance(event, speech.Error):
            self._emit(event)
        # Speech started, a cleared buffer, the early start's events: nothing on this wire.

    def _source_text(self, item_id: str, delta: str) -> None:
        """A segment's firm source text, sent while transcription is configured."""
        if self.config.transcription is None or not delta:
            return
        if item_id != self._input_item:
            delta = word_joiner(self._input_tail, delta) + delta
        self._input_item, self._input_tail = item_id, delta[-1:]
        self._emit(InputTranscriptDelta(delta, on_grid(self.clock_ms)))

    # -- the translator's output ------------------------------------------------------

    def _translated(self, target: str, item_id: str, delta: str, opens: bool, closes: bool) -> None:
        voice = self._voices(target)
        if delta:
            joins = self._said_output and opens and not is_unsegmented(target)
            text = (" " if joins and not delta[:1].isspace() else "") + delta
            self._said_output = True
            self._emit(OutputTranscriptDelta(text, on_grid(self.clock_ms)))
            self.speech.say(text, voice, target, self.clock_ms)
            lag = self.timeline.text(item_id, self.clock_ms)
            if lag is not None:
                self._observe(FIRST_TEXT_SECONDS, lag)
        if closes:
            lag = self.timeline.final(item_id, self.clock_ms)
            self.speech.end_utterance(voice, self.clock_ms)
            if lag is not None:
                self._observe(END_LAG_SECONDS, lag)

    def _error(self, error: DragomanError) -> None:
        self._emit(Error(error))

    # -- engine jobs --------------------------------------------------------------------

    def next_job(self, lane: str = ASR) -> TranslationJob | None:
        job: TranslationJob | None
        if self._expired():
            return None
        if lane == ASR:
            job = self.front.next_job()
        elif lane == MT:
            job = self.translator.next_job()
            if job is not None and job.kind is not JobKind.PREFILL:  # a pause's work, no segment's
                item_id, update_clock = self.translator.started(job)
                self.timeline.mark(item_id, "mt_job", self.clock_ms)
                if update_clock is not None:
                    self.timeline.mt_started(update_clock, self.clock_ms)
        elif lane == TTS:
            job = self.speech.next_job(self.clock_ms, talking=self.front.current_item is not None)
        else:
            raise ValueError(f"a translation session has no lane {lane!r}")
        self._maybe_closed()
        return job

    def job_progress(self, job: TranslationJob, piece: Any) -> None:
        if isinstance(job, SpeakJob) and isinstance(piece, bytes):
            self.speech.chunk(job, piece, self.clock_ms)
            self._observe(OUTPUT_SECONDS, len(piece) / 2 / job.request.rate)
        elif isinstance(job, MTJob) and isinstance(piece, MTDraft):
            self.translator.job_progress(job, piece)

    def job_done(self, job: TranslationJob, result: TranslationResult) -> None:
        if isinstance(job, StepJob) and isinstance(result, StepResult):
            self.front.job_done(job, result)
        elif isinstance(job, MTJob) and isinstance(result, MTDraft):
            self.translator.job_done(job, result)
        elif isinstance(job, SpeakJob):
            self.speech.done(job, self.clock_ms)
        else:
            raise TypeError(f"a result of type {type(result).__name__} for a {type(job).__name__}")
        self._maybe_closed()

    def job_failed(self, job: TranslationJob, error: DragomanError) -> None:
        if isinstance(job, StepJob):
            self.front.job_failed(job, error)
        elif isinstance(job, MTJob):
            self.translator.job_failed(job, error)
        else:
            if not job.cancel.cancelled:
                self._emit(Error(error))  # the clause is skipped; the rest is still said
            self.speech.done(job, self.clock_ms)
        self._maybe_closed()

    # -- closing ------------------------------------------------------------------------

    def _maybe_closed(self) -> None:
        """After `session.close`: once everything heard is translated and said, `session.closed`."""
        if not self._closing or self._close_code is not None:
            return
        if self._transcribing or self.front.current_item is not None:
            return
        if not self.translator.idle or not self.speech.idle:
            return
        self._emit(SessionClosed())
        self._close_code = CloseCode.NORMAL

    @property
    def close_code(self) -> int | None:
        return self._close_code

    def close(self) -> None:
        """The connection is gone: nothing more is said."""
        self.speech.cancel()

    # -- events out ---------------------------------------------------------------------

    def events_to_send(self) -> list[ServerEvent]:
        events = list(self._events)
        self._events.clear()
        return events

    def _emit(self, event: ServerEvent) -> None:
        self._events.append(event)

    def _observe(self, metric: str, value: float) -> None:
        self._observations.append(Observation(metric, value))

    def take_observations(self) -> list[Observation]:
        """What the session and its speech front observed since the last call (`Observed`)."""
        taken, self._observations = self._observations, []
        front = self.front.take_observations()
        self.steps_coalesced += sum(o.metric == STEPS_COALESCED for o in front)
        return front + taken

    def _configured(self, created: bool) -> SessionConfigured:
        return SessionConfigured(
            created=created,
            session_id=self.session_id,
            model=self.model,
            config=self.config,
            expires_at=self.expires_at,
            transcription_engine=self._asr_name,
        )
