"""The voice agent's session: a sans-I/O state machine over three engines.

It keeps the session contract of `sessions/base.py` on three lanes (`jobs.py`):
the speech front (`sessions/speech/front.py`, shared with transcription) turns the
client's audio into the user's turns and their transcripts on `asr`; a response
(`response.py`) generates on `llm` and speaks on `tts`.

What the reference agent's event table asks of the session:

- `session.update` is deep-merged into the running settings: each field the client
  names replaces that field, and every stage reads the settings when it next
  works, so a change applies without a reconnect.
- `conversation.item.create` adds to the context, answers `conversation.item.created`
  (GA: `conversation.item.added`), "and never starts generation"; `response.create`
  does, with its overrides for that one response.
- `response.create` may give the response its own context (`input`), keep it out of the
  conversation (`conversation: "none"`, out of band) and tag it (`metadata`, echoed).

Which response runs and when (one at a time, push-to-talk, barge-in, the early start,
cancellation by generations) is `turn_taking.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from dragoman.audio import g711
from dragoman.audio.pcm import pcm16_to_float
from dragoman.audio.resample import to_model_rate
from dragoman.audio.vad import SpeechProbability
from dragoman.engines.asr.base import StepResult
from dragoman.engines.llm.base import Finished, LLMPiece
from dragoman.errors import ClientError, DragomanError, InvalidEvent, InvalidValue
from dragoman.sessions.agent import events as out
from dragoman.sessions.agent import items
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.conversation import Conversation
from dragoman.sessions.agent.jobs import ASR, LLM, TTS, LLMJob, SpeechJob
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.agent.requests import front_config
from dragoman.sessions.agent.response import ResponseRun
from dragoman.sessions.agent.turn_taking import TurnTaking
from dragoman.sessions.base import Observation
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.config import EngineProfile, with_noise_reduction
from dragoman.sessions.speech.decoder import StepJob
from dragoman.sessions.speech.front import SpeechFront
from dragoman.streaming.turns import TurnCompletion

AgentJob = StepJob | LLMJob | SpeechJob
#: What a job's engine call returns: a step's transcript, the LLM's end, nothing for TTS.
AgentResult = StepResult | Finished | None


#: Settings a WebRTC call's media tracks fix, whatever an update names.
_TRACK_SET = frozenset({"input_rate", "input_codec", "output_codec"})


class AgentSession:
    def __init__(
        self,
        session_id: str,
        engine: EngineProfile,
        config: AgentConfig,
        limits: AgentLimits,
        vad_factory: Callable[[], SpeechProbability] | None = None,
        voices: Callable[[str | None], str] = lambda voice: voice or "",
        turn_model_factory: Callable[[], TurnCompletion] | None = None,
        media_track: bool = False,
    ) -> None:
        """`voices` checks a voice name the client asks for (raising InvalidValue for an
        unknown one) and gives the catalog name it speaks with.

        `media_track`: the audio travels on media tracks (WebRTC), where the server plays the
        answer out: `output_audio_buffer.clear` is taken, and the input rate is the
        transport's, whatever format an update names."""
        self.session_id = session_id
        self.media_track = media_track
        self.engine = engine
        self.limits = limits
        self._voices = voices
        self.config = dataclasses.replace(config, voice=voices(config.voice))
        self.conversation = Conversation()
        self._events: list[out.ServerEvent] = []
        self.front = SpeechFront(
            session_id,
            engine,
            front_config(self.config, limits, engine),
            vad_factory,
            self._heard,
            turn_model_factory=turn_model_factory,
            early_start=True,
        )
        #: What the session did, for the server's usage counters.
        self.stats: defaultdict[str, float] = defaultdict(float)
        self.turns = TurnTaking(
            session_id, self.conversation, limits, self.front, lambda: self.config, self._emit, self.stats
        )
        #: Items committed by server_vad's idle timeout: answered even when nothing was heard
        #: ("The model will effectively prompt the user to continue the conversation").
        self._idle_items: set[str] = set()
        #: Client-created audio items being transcribed: never answered by themselves.
        self._client_audio: set[str] = set()
        self._close_code: int | None = None
        self._emit(self._configured(created=True))

    @property
    def response(self) -> ResponseRun | None:
        """The response that runs (or is held by the early start), if any."""
        return self.turns.response

    # -- events in ------------------------------------------------------------------

    def receive(self, event: out.ClientEvent) -> None:
        """Handle one client event; a client fault becomes an `error` event and changes nothing."""
        try:
            if isinstance(event, out.AppendAudio):
                self.front.append(self._as_pcm16(event.audio))
            elif isinstance(event, out.UpdateSession):
                self._update(event.values, event.event_id)
            elif isinstance(event, out.CommitBuffer):
                self.front.commit()
            elif isinstance(event, out.ClearBuffer):
                self._clear_buffer()
            elif isinstance(event, out.CreateItem):
                self._create_item(event)
            elif isinstance(event, out.RetrieveItem | out.DeleteItem | out.TruncateItem):
                self._emit(items.apply(event, self.conversation, self.response))
                if isinstance(event, out.DeleteItem):
                    self.turns.transcript_in(event.item_id)  # nothing waits for a deleted turn
            elif isinstance(event, out.CreateResponse):
                self._create_response(event)
            elif isinstance(event, out.CancelResponse):
                self.turns.cancel(event.response_id)
            elif isinstance(event, out.ClearOutputAudio) and self.media_track:
                self.turns.output_cleared()
            elif isinstance(event, out.ClearOutputAudio):
                raise InvalidEvent(
                    "output_audio_buffer.clear is for WebRTC connections, where the server plays "
                    "the audio out; over a WebSocket, stop playing on response.done.",
                    code="invalid_event_for_transport",
                )
            else:  # Rejected: only its error goes out, in order with the rest
                self._emit(speech.Error(event.error, event.event_id))
        except ClientError as exc:
            self._emit(speech.Error(exc, event.event_id))

    def _as_pcm16(self, payload: str) -> str:
        """An append as the speech front takes it: G.711 becomes PCM16 at its own 8 kHz."""
        codec = self.config.input_codec
        return payload if codec == "pcm16" or self.media_track else g711.to_pcm16_base64(payload, codec)

    def _create_item(self, event: out.CreateItem) -> None:
        """Add a client's item: `conversation.item.added`, then `conversation.item.done` once it
        is final, which for a message with untranscribed audio is when its transcript is in.
        Raises ClientError before anything changes."""
        audio = None
        if event.audio:
            pieces = [self._as_pcm16(part.audio) for _, part in sorted(event.audio.items())]
            audio = to_model_rate([pcm16_to_float(piece)[0] for piece in pieces], self.config.input_rate)
        if audio is not None and len(audio) == 0:
            raise InvalidValue("The input_audio part holds no audio.", param="item.content")
        item, previous = self.conversation.add(event.item, event.previous_item_id)
        assert item.id is not None
        self._emit(out.ItemAdded(item, previous))
        if audio is None:
            self._emit(out.ItemDone(item, previous))
            return
        try:
            self.front.transcribe(item.id, audio)
        except ClientError:
            self.conversation.remove(item.id)
            raise
        self._client_audio.add(item.id)
        self.turns.awaits_transcript(item.id)

    def _clear_buffer(self) -> None:
        turn = self.front.current_item
        self.front.clear()
        self.turns.buffer_cleared(turn.item_id if turn is not None else None)

    def configure(self, values: Mapping[str, Any]) -> None:
        """Settings given with the connection (a WebRTC call's `session`), before the client
        is told anything: `session.created` then carries them. Raises ClientError."""
        self._update(values)
        refused = [event.error for event in self._events if isinstance(event, speech.Error)]
        if refused:
            raise refused[0]
        self._events = [self._configured(created=True)]

    def _update(self, values: Mapping[str, Any], event_id: str | None = None) -> None:
        """Merge an update into the settings. What can be applied is, and each value that
        cannot be is refused by itself (an `error` naming it): OpenAI takes the values this
        server may lack a part for (semantic_vad without the turn model), and a client's
        instructions and tools must not be lost with them. Raises ClientError when nothing
        could be applied."""
        if self.media_track:  # the transport's media tracks set the audio formats
            values = {key: value for key, value in values.items() if key not in _TRACK_SET}
        try:
            self._apply(values)
        except ClientError:
            if len(values) < 2:
                raise
        else:
            self._emit(self._configured(created=False))
            return
        refused: list[ClientError] = []
        for key, value in values.items():
            try:
                self._apply({key: value})
            except ClientError as exc:
                refused.append(exc)
        if len(refused) == len(values):
            raise refused[0]
        for error in refused:
            self._emit(speech.Error(error, event_id))
        self._emit(self._configured(created=False))

    def _apply(self, values: Mapping[str, Any]) -> None:
        """Merge `values` into the settings, all or nothing; raises ClientError."""
        new = dataclasses.replace(self.config, **with_noise_reduction(values, self.config.noise_reduction))
        if "voice" in values:
            new = dataclasses.replace(new, voice=self._voices(new.voice))
        if self.response is not None and new.output_rate != self.config.output_rate:
            raise InvalidValue(
                "The output audio format can change only while no response is in progress.",
                param="session.audio.output.format",
            )
        self.front.reconfigure(front_config(new, self.limits, self.engine))
        self.config = new

    def _configured(self, created: bool) -> out.SessionConfigured:
        return out.SessionConfigured(
            created=created,
            session_id=self.session_id,
            config=self.config,
            engine_name=self.limits.model_name,
        )

    # -- responses --------------------------------------------------------------------

    def _create_response(self, event: out.CreateResponse) -> None:
        def config() -> AgentConfig:
            """The response's settings: the session's with its overrides; raises ClientError."""
            overrides = event.overrides
            config = dataclasses.replace(self.config, **overrides)
            if "voice" in overrides:
                config = dataclasses.replace(config, voice=self._voices(config.voice))
            return config

        self.turns.create(config, event.input, event.metadata, in_conversation=not event.out_of_band)

    # -- what the speech front heard ------------------------------------------------------

    def _heard(self, event: speech.FrontEvent) -> None:
        if isinstance(event, speech.Provisional | speech.TurnResumed):
            self.turns.provisional(event)
            return
        if isinstance(event, speech.SpeechStarted):
            turns = self.config.turn_detection
            self.turns.speech_started(interrupts=turns is not None and turns.interrupt_response)
        if isinstance(event, speech.Committed):
            turn = out.Message(event.item_id, "user", (out.ContentPart("input_audio", transcript=None),))
            added, previous = self.conversation.add(turn, self.turns.turn_follows(event.item_id))
            self.turns.awaits_transcript(event.item_id)
            # OpenAI: `previous_item_id` is the item the turn follows in the conversation (as in
            # `conversation.item.added`), whatever the speech front counts as the previous turn.
            self._emit(dataclasses.replace(event, previous_item_id=previous))
            self._emit(out.ItemAdded(added, previous))
            return
        if isinstance(event, speech.TimeoutTriggered):
            self._idle_items.add(event.item_id)
        elif isinstance(event, speech.Failed):
            self._idle_items.discard(event.item_id)
            self._emit(event)
            self.turns.transcript_in(event.item_id)
            self._client_audio.discard(event.item_id)
            self._item_done(event.item_id)
            self.turns.ask_when_ready()
            return
        if isinstance(event, speech.Completed):
            self._emit(event)
            answered = self.turns.transcript_in(event.item_id)
            self._transcribed(event, answered)
            self.turns.ask_when_ready()
            return
        if isinstance(event, speech.Partial):
            return  # the transcription session's own extension
        if isinstance(event, speech.Delta) and self.config.input_transcription is None:
            return  # OpenAI sends transcription deltas only when input transcription is on
        self._emit(event)

    def _item_done(self, item_id: str) -> None:
        """`conversation.item.done` for an item the session finished (a turn, once transcribed)."""
        item = self.conversation.get(item_id)
        if item is not None:
            self._emit(out.ItemDone(item, self.conversation.previous_of(item_id)))

    def _transcribed(self, event: speech.Completed, answered: bool) -> None:
        """A turn's transcript, into the conversation; the turn is answered unless a response
        already waits for it (`answered`), or the client created it."""
        item = self.conversation.get(event.item_id)
        if isinstance(item, out.Message):
            self.conversation.replace(_with_transcript(item, event.transcript))
        self._item_done(event.item_id)
        if event.item_id in self._client_audio:
            self._client_audio.discard(event.item_id)
            return
        idle = event.item_id in self._idle_items
        self._idle_items.discard(event.item_id)
        self.turns.transcribed(event, answered, idle)

    # -- engine jobs --------------------------------------------------------------------

    def next_job(self, lane: str = ASR) -> AgentJob | None:
        if lane == ASR:
            return self.front.next_job()
        response = self.response
        if response is None:
            return None
        if lane == LLM:
            return response.next_llm_job()
        if lane == TTS:
            return response.next_speech_job()
        raise ValueError(f"unknown lane {lane!r}")

    def job_progress(self, job: AgentJob, piece: LLMPiece | bytes) -> None:
        if not isinstance(job, StepJob):
            self.turns.progress(job, piece)

    def job_done(self, job: AgentJob, result: AgentResult) -> None:
        if isinstance(job, StepJob):
            assert isinstance(result, StepResult)
            self.front.job_done(job, result)
        else:
            assert not isinstance(result, StepResult)
            self.turns.done(job, result)

    def job_failed(self, job: AgentJob, error: DragomanError) -> None:
        if isinstance(job, StepJob):
            self.front.job_failed(job, error)
        else:
            self.turns.failed(job, error)

    # -- out ------------------------------------------------------------------------------

    def _emit(self, event: out.ServerEvent) -> None:
        self._events.append(event)

    def events_to_send(self) -> list[out.ServerEvent]:
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        """The connection is gone: stop the response's engine work now."""
        self.turns.close()

    @property
    def input_seconds(self) -> float:
        return self.front.input_seconds

    def refuse_audio(self, refused: bool) -> None:
        self.front.audio_refused = refused

    def take_observations(self) -> list[Observation]:
        """For the server's metrics, which the driver records (`sessions/base.py`)."""
        return self.front.take_observations()

    @property
    def close_code(self) -> int | None:
        return self._close_code


def _with_transcript(item: out.Message, transcript: str) -> out.Message:
    """A user's audio message with its transcript: on its first audio part still without one
    (a client's item with several untranscribed parts was transcribed as one)."""
    parts = list(item.content)
    untranscribed = [i for i, p in enumerate(parts) if p.type == "input_audio" and p.transcript is None]
    for rank, index in enumerate(untranscribed):
        parts[index] = dataclasses.replace(parts[index], transcript=transcript if rank == 0 else "")
    return dataclasses.replace(item, content=tuple(parts))
