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
- One response at a time: a second `response.create` while one is active gets
  `conversation_already_has_active_response`.
- Push-to-talk: a response waits for the transcript of every turn committed before it
  was created (a client commits and at once asks for the answer; OpenAI answers the
  committed audio). Until then it is created but asks the LLM nothing.
- `response.create` may give the response its own context (`input`), keep it out of the
  conversation (`conversation: "none"`, out of band) and tag it (`metadata`, echoed).
- Barge-in: when the user starts speaking during a response and
  `turn_detection.interrupt_response` is on (the default), the response is closed
  first (`output_audio.done`, `output_audio_transcript.done`, `response.done`
  cancelled with `turn_detected`) and only then is `speech_started` sent. With it
  off, the user's speech is still transcribed and delivered while the response
  plays on, and the turn is answered once the response ends.
- The early start (`early_start.py`): at each pause in a turn, the answer starts on the
  turn's transcript before the silence runs out, held from the client until the turn really
  ends; speech that goes on drops it unseen.
- Cancellation by generations: every response takes the next value of a monotonic
  counter, and every job carries it. A piece of a superseded generation is dropped;
  a piece of the current one always passes, so a response that did not finish
  cleanly can never silence the next.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.audio import g711
from dragoman.audio.pcm import pcm16_to_float
from dragoman.audio.resample import to_model_rate
from dragoman.audio.vad import SpeechProbability
from dragoman.engines.asr.base import StepResult
from dragoman.engines.llm.base import (
    ChatRequest,
    Finished,
    LLMPiece,
    TextPiece,
    ToolCallPiece,
)
from dragoman.errors import ClientError, DragomanError, InvalidEvent, InvalidValue
from dragoman.sessions.agent import events as out
from dragoman.sessions.agent import items
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.conversation import ROOT, Conversation
from dragoman.sessions.agent.early_start import Speculation, same_words
from dragoman.sessions.agent.jobs import ASR, LLM, TTS, LLMJob, SpeechJob
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.agent.requests import chat_request, front_config
from dragoman.sessions.agent.response import Reason, ResponseRun
from dragoman.sessions.base import Observation
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.config import EngineProfile
from dragoman.sessions.speech.decoder import StepJob
from dragoman.sessions.speech.front import SpeechFront
from dragoman.streaming.turns import TurnCompletion

AgentJob = StepJob | LLMJob | SpeechJob
#: What a job's engine call returns: a step's transcript, the LLM's end, nothing for TTS.
AgentResult = StepResult | Finished | None


#: Settings a WebRTC call's media tracks fix, whatever an update names.
_TRACK_SET = frozenset({"input_rate", "input_codec", "output_codec"})


class ActiveResponse(ClientError):
    code = "conversation_already_has_active_response"


@dataclass
class _Waiting:
    """A response created before the transcripts of its context: the turns it waits for, and
    how to build its request once they are in."""

    response: ResponseRun
    config: AgentConfig
    context: tuple[out.Item | out.ItemReference, ...] | None
    turns: set[str] = field(default_factory=set)


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
        self.generation = 0
        self.response: ResponseRun | None = None
        #: A turn that ended while a response it could not interrupt played: answered next.
        self._answer_next = False
        #: The early start's held response, while its turn is not yet over.
        self._early: Speculation | None = None
        #: Items committed by server_vad's idle timeout: answered even when nothing was heard
        #: ("The model will effectively prompt the user to continue the conversation").
        self._idle_items: set[str] = set()
        #: Committed turns (and client audio items) whose transcript has not come yet, in order.
        self._untranscribed: dict[str, None] = {}
        #: Client-created audio items being transcribed: never answered by themselves.
        self._client_audio: set[str] = set()
        self._waiting: _Waiting | None = None
        self._close_code: int | None = None
        #: What the session did, for the server's usage counters.
        self.stats: defaultdict[str, float] = defaultdict(float)
        self._emit(self._configured(created=True))

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
                    self._transcript_in(event.item_id)  # nothing waits for a deleted turn
            elif isinstance(event, out.CreateResponse):
                self._create_response(event)
            elif isinstance(event, out.CancelResponse):
                self._cancel_response(event.response_id)
            elif isinstance(event, out.ClearOutputAudio) and self.media_track:
                self._clear_output_audio()
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
        self._untranscribed[item.id] = None

    def _clear_buffer(self) -> None:
        """Drop the buffer, and an early start held for the turn it drops: that turn will never
        be committed, so nothing would ever release or drop its answer."""
        turn = self.front.current_item
        self.front.clear()
        if self._early is not None and turn is not None and self._early.item_id == turn.item_id:
            self._drop_early()

    def _clear_output_audio(self) -> None:
        """WebRTC: "cut off the current audio response". The transport drops the unplayed
        audio; what is still being generated for it stops too."""
        if self.response is not None and self._early is None:
            self._stop(self.response, "client_cancelled")

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
        new = dataclasses.replace(self.config, **values)
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
        if self._early is not None:
            self._drop_early()  # unseen by the client, and its own request comes first
        if self.response is not None:
            raise ActiveResponse(
                f"Conversation already has an active response in progress: {self.response.id}. "
                "Wait until the response is finished before creating a new one."
            )
        overrides = event.overrides
        config = dataclasses.replace(self.config, **overrides)
        if "voice" in overrides:
            config = dataclasses.replace(config, voice=self._voices(config.voice))
        if event.input is not None:
            for index, entry in enumerate(event.input):
                if isinstance(entry, out.ItemReference) and self.conversation.get(entry.id) is None:
                    raise InvalidValue(
                        f"No item with id {entry.id[:64]!r} is in the conversation.",
                        param=f"response.input[{index}].id",
                    )
        self._start(config, event.input, event.metadata, in_conversation=not event.out_of_band)

    def _start(
        self,
        config: AgentConfig,
        context: tuple[out.Item | out.ItemReference, ...] | None = None,
        metadata: Mapping[str, str] | None = None,
        in_conversation: bool = True,
    ) -> None:
        """Start a response; it asks the LLM once the transcripts of its context are in."""
        self.generation += 1
        self.stats["responses"] += 1
        self.front.hold_idle()  # the idle timeout runs again once this answer has played
        self.response = ResponseRun(
            config,
            None,
            self.generation,
            self.conversation,
            self._emit,
            metadata=metadata,
            in_conversation=in_conversation,
        )
        if context is None:
            turns = set(self._untranscribed)
        else:
            turns = {
                e.id for e in context if isinstance(e, out.ItemReference) and e.id in self._untranscribed
            }
        self._waiting = _Waiting(self.response, config, context, turns)
        self._ask_when_ready()

    def _ask_when_ready(self) -> None:
        """Ask the LLM for the waiting response once nothing it waits for is untranscribed."""
        waiting = self._waiting
        if waiting is None:
            return
        if waiting.response is not self.response or not waiting.response.waiting:
            self._waiting = None  # cancelled meanwhile
            return
        if waiting.turns:
            return
        self._waiting = None
        context = None
        if waiting.context is not None:
            context = [self._resolve(entry) for entry in waiting.context]
        request = chat_request(
            waiting.config,
            self.conversation,
            self.limits,
            self.session_id,
            context=[item for item in context if item is not None] if context is not None else None,
        )
        waiting.response.ask(request)

    def _resolve(self, entry: out.Item | out.ItemReference) -> out.Item | None:
        """An item of a response's own context; a reference, as the conversation holds it now."""
        return self.conversation.get(entry.id) if isinstance(entry, out.ItemReference) else entry

    def _transcript_in(self, item_id: str) -> bool:
        """A turn's transcript came (or never will): whether the waiting response waited for it."""
        self._untranscribed.pop(item_id, None)
        waiting = self._waiting
        if waiting is None or item_id not in waiting.turns:
            return False
        waiting.turns.discard(item_id)
        return True

    def _chat(self, config: AgentConfig, pending_turn: str | None = None) -> ChatRequest:
        return chat_request(config, self.conversation, self.limits, self.session_id, pending_turn)

    def _cancel_response(self, response_id: str | None) -> None:
        response = self.response
        if response is None or self._early is not None:  # a held early start is not the client's yet
            raise InvalidValue(
                "There is no response in progress to cancel.", code="response_cancel_not_active"
            )
        if response_id is not None and response_id != response.id:
            raise InvalidValue(
                f"Response {response_id[:64]!r} is not the one in progress.", param="response_id"
            )
        self._stop(response, "client_cancelled")

    def _stop(self, response: ResponseRun, reason: Reason) -> None:
        """Cancel the response now; its jobs' later pieces belong to a stale generation."""
        self.stats["responses_cancelled"] += 1
        self.generation += 1
        response.cancel(reason)
        self._ended(response)

    def _ended(self, response: ResponseRun) -> None:
        if self.response is response:
            self.response = None
        self.stats["output_audio_seconds"] += response.audio_seconds
        if response.finished is not None:
            self.stats["llm_input_tokens"] += response.finished.input_tokens
            self.stats["llm_output_tokens"] += response.finished.output_tokens
            self.stats["llm_cached_tokens"] += response.finished.cached_tokens
        if self._answer_next and self.response is None:
            self._answer_next = False
            self._start(self.config)
        if self.response is None:
            # OpenAI: the idle timeout "will be applied after the last model response's audio has
            # finished playing, i.e. it's set to the `response.done` time plus audio playback duration".
            self.front.arm_idle(response.audio_seconds)

    def _live(self, job: LLMJob | SpeechJob) -> ResponseRun | None:
        """The response a job's piece is for, or None when its generation is stale."""
        response = self.response
        if response is None or job.generation != self.generation or job.response_id != response.id:
            return None
        return response

    # -- what the speech front heard ------------------------------------------------------

    def _heard(self, event: speech.FrontEvent) -> None:
        if isinstance(event, speech.Provisional | speech.TurnResumed):
            self._early_event(event)
            return
        turns = self.config.turn_detection
        interrupts = turns is not None and turns.interrupt_response
        if isinstance(event, speech.SpeechStarted) and self.response is not None and interrupts:
            self._answer_next = False  # the user is saying something new
            if self._early is not None:
                self._drop_early()
            else:
                self.stats["barge_ins"] += 1
                self._stop(self.response, "turn_detected")
        if isinstance(event, speech.Committed):
            turn = out.Message(event.item_id, "user", (out.ContentPart("input_audio", transcript=None),))
            early = self._early if self._early is not None and self._early.item_id == event.item_id else None
            # An early answer is already in the conversation: the turn goes in before it.
            after = (early.before or ROOT) if early is not None else None
            added, previous = self.conversation.add(turn, after)
            self._untranscribed[event.item_id] = None
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
            self._transcript_in(event.item_id)
            self._client_audio.discard(event.item_id)
            self._item_done(event.item_id)
            self._ask_when_ready()
            return
        if isinstance(event, speech.Completed):
            self._emit(event)
            answered = self._transcript_in(event.item_id)
            self._transcribed(event, answered)
            self._ask_when_ready()
            return
        if isinstance(event, speech.Partial):
            return  # the transcription session's own extension
        if isinstance(event, speech.Delta) and self.config.input_transcription is None:
            return  # OpenAI sends transcription deltas only when input transcription is on
        self._emit(event)

    # -- the early start (early_start.py) -------------------------------------------------

    def _early_event(self, event: speech.Provisional | speech.TurnResumed) -> None:
        if isinstance(event, speech.TurnResumed):
            if self._early is not None and self._early.item_id == event.item_id:
                self._drop_early()
            return
        turns = self.config.turn_detection
        if self.response is not None or turns is None or not turns.create_response:
            return
        if not event.transcript.strip():
            return
        self.generation += 1
        held: list[out.ServerEvent] = []
        request = self._chat(self.config, pending_turn=event.transcript)
        response = ResponseRun(self.config, request, self.generation, self.conversation, held.append)
        self._early = Speculation(event.item_id, event.transcript, response, self.conversation.last_id, held)
        self.response = response
        self.front.hold_idle()

    def _drop_early(self) -> None:
        early, self._early = self._early, None
        assert early is not None
        self.generation += 1  # what its jobs still send is stale
        early.drop(self.conversation)
        if self.response is early.response:
            self.response = None
            self.front.arm_idle()

    def _confirm_early(self, early: Speculation) -> None:
        self._early = None
        self.stats["responses"] += 1
        self.stats["early_starts"] += 1
        self._events += early.release(early.item_id)
        early.response.emit_to(self._emit)
        if early.response.done:
            self._ended(early.response)

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
        early = self._early
        if early is not None and early.item_id == event.item_id:
            if same_words(event.transcript, early.transcript):
                self._confirm_early(early)
                return
            self._drop_early()  # the final transcript says something else: answer that
        turns = self.config.turn_detection
        idle = event.item_id in self._idle_items
        self._idle_items.discard(event.item_id)
        if not (event.transcript.strip() or idle) or turns is None or not turns.create_response:
            return
        if answered:
            return
        if self.front.user_speaking:
            # The transcript came after the user went on: answering now would talk over them,
            # with the barge-in check already past. Their next turn is answered with both.
            return
        if self.response is None:
            self._start(self.config)
        else:
            self._answer_next = True

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
        if isinstance(job, StepJob):
            return
        response = self._live(job)
        if response is None:
            return  # a superseded generation's output is dropped
        if isinstance(job, SpeechJob) and isinstance(piece, bytes):
            response.speech_chunk(job, piece)
        elif isinstance(piece, TextPiece):
            response.text(piece.text)
        elif isinstance(piece, ToolCallPiece):
            self.stats["tool_calls"] += 1
            response.tool_call(piece.call)
        self._after(response)

    def job_done(self, job: AgentJob, result: AgentResult) -> None:
        if isinstance(job, StepJob):
            assert isinstance(result, StepResult)
            self.front.job_done(job, result)
            return
        response = self._live(job)
        if response is None:
            return
        if isinstance(job, LLMJob):
            assert isinstance(result, Finished)
            response.llm_done(result)
        else:
            response.speech_done(job)
        self._after(response)

    def job_failed(self, job: AgentJob, error: DragomanError) -> None:
        if isinstance(job, StepJob):
            self.front.job_failed(job, error)
            return
        response = self._live(job)
        if response is None:
            return
        if isinstance(job, LLMJob):
            response.llm_failed(error)
        else:
            self._emit(speech.Error(error))
            response.speech_failed(job)
        self._after(response)

    def _after(self, response: ResponseRun) -> None:
        held = self._early is not None and self._early.response is response
        if response.done and not held:  # a held response ends when it is released
            self._ended(response)

    # -- out ------------------------------------------------------------------------------

    def _emit(self, event: out.ServerEvent) -> None:
        self._events.append(event)

    def events_to_send(self) -> list[out.ServerEvent]:
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        """The connection is gone: stop the response's engine work now."""
        if self.response is not None:
            for job in self.response.in_flight():
                job.cancel.cancel()

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
