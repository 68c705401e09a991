"""The Realtime transcription session: a sans-I/O state machine.

It keeps the session contract of `sessions/base.py`. Client events
(`sessions.transcription.events`, parsed from the wire by the protocol layer) go in
through `receive`; server events come out of `events_to_send`, for the protocol to
write in the client's generation; decode work comes out of `next_job` and its
outcome goes back in through `job_done` / `job_failed`.

What it adds to the speech front (`sessions/speech/front.py`, which holds the audio
input, the turns and the re-decode steps) is the session itself: its settings,
updated all or nothing, and `session.created` / `session.updated`.

The whole hypothesis of each step (`mstar.transcription.partial`, this server's extension)
goes out only to a client that asked for it (`partials`): a strict client refuses an event
type OpenAI does not send.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from dragoman.audio.vad import SpeechProbability
from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import StepResult
from dragoman.errors import ClientError, DragomanError
from dragoman.sessions.base import DEFAULT_LANE, Observation
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import StepJob
from dragoman.sessions.speech.events import FrontEvent, Partial, Provisional, TurnResumed
from dragoman.sessions.speech.front import SpeechFront
from dragoman.sessions.transcription.events import (
    AppendAudio,
    ClearBuffer,
    ClientEvent,
    CommitBuffer,
    Error,
    ServerEvent,
    SessionConfigured,
    UpdateSession,
)
from dragoman.streaming.turns import ServerVADConfig, TurnCompletion


def default_config(settings: TranscriptionSettings, input_rate: int, *, vad: bool) -> SessionConfig:
    """A new transcription session's settings: OpenAI's, where OpenAI has one.

    OpenAI's transcription guide: "The Realtime API supports automatic voice activity
    detection (VAD). Enabled by default, VAD will control when the input audio buffer is
    committed"; its example session shows `server_vad` with the defaults its types give
    (threshold 0.5, prefix_padding_ms 300, silence_duration_ms 500), which ServerVADConfig
    holds. A client that commits its own turns sends `turn_detection: null`. Without a VAD
    model (`vad` False) the session starts at null, as `session.created` then says.
    """
    config = SessionConfig.defaults(settings, input_rate)
    return dataclasses.replace(config, turn_detection=ServerVADConfig() if vad else None)


class TranscriptionSession:
    def __init__(
        self,
        session_id: str,
        engine: EngineProfile,
        config: SessionConfig,
        vad_factory: Callable[[], SpeechProbability] | None = None,
        turn_model_factory: Callable[[], TurnCompletion] | None = None,
        partials: bool = False,
    ) -> None:
        self.session_id = session_id
        self.engine = engine
        self.partials = partials
        self._events: list[ServerEvent] = []
        self.front = SpeechFront(
            session_id,
            engine,
            config,
            vad_factory,
            self._heard,
            turn_model_factory=turn_model_factory,
        )
        self._emit(self._configured(created=True))

    def _heard(self, event: FrontEvent) -> None:
        # The early start's events are the agent's; this front never runs it.
        if isinstance(event, Partial) and not self.partials:
            return
        if not isinstance(event, Provisional | TurnResumed):
            self._events.append(event)

    @property
    def config(self) -> SessionConfig:
        return self.front.config

    @property
    def input_seconds(self) -> float:
        return self.front.input_seconds

    def refuse_audio(self, refused: bool) -> None:
        self.front.audio_refused = refused

    @property
    def revisions(self) -> int:
        """Steps, over all items, whose firm text contradicted deltas already sent (0 by design)."""
        return self.front.revisions

    @property
    def coalesced(self) -> int:
        """Partial steps skipped under load, their audio decoded by the next step."""
        return self.front.coalesced

    def take_observations(self) -> list[Observation]:
        """For the server's metrics, which the driver records (`sessions/base.py`)."""
        return self.front.take_observations()

    @property
    def item_cap_seconds(self) -> float:
        return self.front.item_cap_seconds

    # -- events in ---------------------------------------------------------

    def receive(self, event: ClientEvent) -> None:
        """Handle one client event; a client fault becomes an `error` event and changes nothing."""
        try:
            if isinstance(event, UpdateSession):
                self._update(event.values)
            elif isinstance(event, AppendAudio):
                self.front.append(event.audio)
            elif isinstance(event, CommitBuffer):
                self.front.commit()
            elif isinstance(event, ClearBuffer):
                self.front.clear()
            else:  # Rejected: only its error goes out, in order with the rest
                self._emit(Error(event.error, event.event_id))
        except ClientError as exc:
            self._emit(Error(exc, event.event_id))

    def _update(self, values: Mapping[str, Any]) -> None:
        """Apply a session update, all or nothing."""
        values = dict(values)
        partials = values.pop("partials", None)
        self.front.reconfigure(self.config.patched(values, cap=self.item_cap_seconds))
        if partials is not None:
            self.partials = partials
        self._emit(self._configured(created=False))

    def _configured(self, created: bool) -> SessionConfigured:
        return SessionConfigured(
            created=created,
            session_id=self.session_id,
            config=self.config,
            engine_name=self.engine.name,
            max_item_seconds=self.item_cap_seconds,
            partials=self.partials,
        )

    # -- engine jobs: the front's ----------------------------------------------

    def next_job(self, lane: str = DEFAULT_LANE) -> StepJob | None:
        return self.front.next_job()

    def job_done(self, job: StepJob, result: StepResult) -> None:
        self.front.job_done(job, result)

    def job_failed(self, job: StepJob, error: DragomanError) -> None:
        self.front.job_failed(job, error)

    @property
    def close_code(self) -> int | None:
        """Never set: only the client ends a Realtime session."""
        return None

    # -- events out ----------------------------------------------------------------

    def events_to_send(self) -> list[ServerEvent]:
        events = list(self._events)
        self._events.clear()
        return events

    def _emit(self, event: ServerEvent) -> None:
        self._events.append(event)


__all__ = ["EngineProfile", "SessionConfig", "StepJob", "TranscriptionSession", "default_config"]
