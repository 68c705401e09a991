"""The speech front: audio in, turns, and the streaming transcript of each turn.

It is what a transcription session and a voice agent share, up to a committed,
transcribed turn: appends of base64 PCM at the client's rate are resampled to the
engine's, turn detection (server_vad or semantic_vad, when on) cuts them into turns,
and each turn is an item that is transcribed as it grows and once more when it is
committed (`decoder.py`). It is a sub-machine of its session: the session feeds it
client events and takes its engine jobs and events with the same contract
(`sessions/base.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.vad import SpeechProbability
from dragoman.engines.asr.base import FloatAudio, StepResult
from dragoman.errors import BufferTooLong, DragomanError, InvalidValue
from dragoman.sessions.base import Observation
from dragoman.sessions.speech.audio_input import AudioInput
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import ItemDecoder, StepJob
from dragoman.sessions.speech.events import (
    Cleared,
    Committed,
    FrontEvent,
    SpeechStarted,
    SpeechStopped,
    TimeoutTriggered,
    TurnResumed,
)
from dragoman.sessions.speech.item import Item
from dragoman.streaming import turns

#: Committed items that may wait for their final step; past it appends and commits are refused.
MAX_PENDING_ITEMS = 8
#: Observed (`Observation`, in seconds) for audio refused from a client far ahead of real time.
AUDIO_REFUSED_SECONDS = "audio_refused_seconds"


class SpeechFront:
    def __init__(
        self,
        session_id: str,
        engine: EngineProfile,
        config: SessionConfig,
        vad_factory: Callable[[], SpeechProbability] | None,
        emit: Callable[[FrontEvent], None],
        *,
        turn_model_factory: Callable[[], turns.TurnCompletion] | None = None,
        early_start: bool = False,
    ) -> None:
        """`early_start` (the voice agent, the interpreter): with either VAD, each pause in a
        turn is decoded whole the moment it begins, and its transcript goes out (`Provisional`)
        unless speech came back meanwhile."""
        self.session_id = session_id
        self.engine = engine
        self.config = config
        self._vad_factory = vad_factory
        #: semantic_vad's end-of-turn model (None: the server has none, semantic_vad is refused).
        self._turn_model_factory = turn_model_factory
        self._early_start = early_start
        self._emit = emit
        self._input = AudioInput(config.input_rate)
        self._segmenter: turns.TurnSegmenter | None = None
        self._item: Item | None = None
        self._last_item_id: str | None = None
        #: What the front saw happen, for the server's metrics (`take_observations`).
        self._observations: list[Observation] = []
        self._decoder = ItemDecoder(session_id, engine, config, emit, self._observations.append)
        #: The voice agent holds server_vad's idle timer while it answers (`hold_idle`).
        self._idle_held = False
        #: Set by the driver while the client is too far ahead of real time (`_check_real_time`).
        self.audio_refused = False
        self._input.set_noise_reduction(config.noise_reduction)
        self._make_segmenter()

    @property
    def input_seconds(self) -> float:
        """Seconds of audio taken so far, by the session's one input clock."""
        return self._input.clock / SAMPLE_RATE

    @property
    def current_item(self) -> Item | None:
        """The item audio goes into now (None between turns)."""
        return self._item

    def reconfigure(self, new: SessionConfig) -> None:
        """Take a new config, or raise InvalidValue and keep the old one."""
        if new.input_rate != self.config.input_rate and not self.buffer_empty():
            raise InvalidValue(
                "The input audio rate can change only while the input audio buffer is empty; "
                "commit or clear it first.",
                param="session.input_audio_format",
            )
        toggles_vad = (new.turn_detection is None) != (self.config.turn_detection is None)
        if toggles_vad and not self.buffer_empty():
            raise InvalidValue(
                "turn_detection can be switched on or off only while the input audio buffer is empty.",
                param="session.turn_detection",
            )
        if new.turn_detection is not None and self._vad_factory is None:
            raise InvalidValue("This server has no VAD model; turn_detection must be null.")
        if isinstance(new.turn_detection, turns.SemanticVADConfig) and self._turn_model_factory is None:
            raise InvalidValue(
                "This server has no turn model; use turn_detection 'server_vad' or null.",
                param="session.turn_detection.type",
            )
        old = self.config
        self.config = self._decoder.config = new
        if new.input_rate != old.input_rate:
            self._input.reset()
            self._input.set_rate(new.input_rate)
            self._start_over()
        self._input.set_noise_reduction(new.noise_reduction)
        # A change of the VAD's settings waits for the open turn to end (`_follow_config`).
        self._follow_config()

    def append(self, payload: str) -> None:
        """Take an append of base64 PCM16 at the input rate; raises ClientError (nothing changes)."""
        self._check_backlog()
        self._check_real_time(payload)
        samples, odd = self._input.decode(payload)
        if self._segmenter is None:
            item = self._open_item()
            clock = self._input.model_samples(item.input_samples + len(samples))
            if clock > self.item_cap_samples:
                raise BufferTooLong(
                    f"The input audio buffer would exceed {self.item_cap_seconds:g} s, the longest item "
                    "this server transcribes; commit or clear the buffer.",
                    param="audio",
                )
            item.add(self._input.accept(samples, odd))
            item.input_samples += len(samples)
            item.clock = clock
        else:
            self._segment(self._input.accept(samples, odd))
        self._decoder.coalesce(self._item)

    def commit(self) -> None:
        """The client ends the turn: the buffer becomes a committed item; raises when it is empty."""
        self._check_backlog()
        tail = self._input.drain()
        if self._segmenter is not None:
            self._segment(tail)
            # Speech held short of min_speech_ms counts too: the client says the buffer is a turn.
            self._apply(self._segmenter.open_candidate())
            # The client ended the turn: what follows is a new one.
            self._start_over()
        elif self._item is not None:
            self._item.add(tail)
        item = self._item
        if item is None or item.samples == 0:
            self._follow_config()
            raise InvalidValue(
                "Error committing input audio buffer: the buffer is empty.",
                code="input_audio_buffer_commit_empty",
            )
        self._close_item()
        self._follow_config()

    def transcribe(self, item_id: str, audio: FloatAudio) -> None:
        """Transcribe 16 kHz audio that came whole, outside the input stream (a client's
        `input_audio` item): its transcript comes as a committed turn's does, under `item_id`.
        Raises ClientError (too long, or too many items waiting)."""
        self._check_backlog()
        if len(audio) > self.item_cap_samples:
            raise BufferTooLong(
                f"The audio is longer than {self.item_cap_seconds:g} s, the longest item this "
                "server transcribes.",
                param="item.content",
            )
        item = Item(previous_item_id=None, item_id=item_id)
        item.add(audio)
        item.clock = item.samples
        item.closed = True
        self._decoder.commit(item)

    def clear(self) -> None:
        """Drop the buffer; a step of the dropped item that has not started is cancelled."""
        self._input.reset()
        self._start_over()
        if self._item is not None:
            self._decoder.drop(self._item)
            self._item = None
        self._follow_config()
        self._emit(Cleared())

    def _check_backlog(self) -> None:
        """Backpressure: audio coming faster than it can be transcribed is refused, not queued.

        One client sending 200 x (30 s append + commit) once queued 384 MB in 1.6 s; the
        committed items waiting for their final step are bounded instead.
        """
        pending = len(self._decoder.committed)
        if pending >= MAX_PENDING_ITEMS:
            raise InvalidValue(
                f"{pending} committed items are still waiting to be transcribed; "
                "send audio no faster than real time, or wait for their transcripts.",
                code="input_audio_buffer_backlog",
            )

    def _check_real_time(self, payload: str) -> None:
        """A client far ahead of real time while others keep to it (`audio_refused`, the
        driver's call) is refused, not read at real time: a socket left unread would stall its
        keepalive pings behind its own audio, and the connection would die of it."""
        if not self.audio_refused:
            return
        # Base64 of PCM16: 4 characters per 3 bytes, 2 bytes per sample; nothing is decoded.
        self._observations.append(
            Observation(AUDIO_REFUSED_SECONDS, len(payload) * 3 / 8 / self.config.input_rate)
        )
        raise InvalidValue(
            "Audio is arriving faster than real time while other sessions are being served; this "
            "append was not taken. Send audio no faster than real time.",
            code="input_audio_buffer_backlog",
        )

    # -- turn detection ------------------------------------------------------

    def _make_segmenter(self) -> None:
        vad = self.config.turn_detection
        if vad is None or self._vad_factory is None:
            self._segmenter = None
            return
        factory = self._turn_model_factory
        semantic = isinstance(vad, turns.SemanticVADConfig)
        turn_model = factory() if semantic and factory else None
        # A segmenter that takes over keeps the timeline where the last one left it; one
        # that starts (VAD switched on) starts at the input's clock.
        offset = self._segmenter.position if self._segmenter is not None else self._input.clock
        self._segmenter = turns.TurnSegmenter(
            vad,
            self._vad_factory(),
            SAMPLE_RATE,
            offset_samples=offset,
            turn_model=turn_model,
            pauses=self._early_start,
        )
        if self._idle_held:
            self._segmenter.hold_idle()

    def _follow_config(self) -> None:
        """Segment by the config's turn_detection, once no turn is open.

        A change of the VAD's settings while a turn (or a candidate turn) is open takes
        effect at the next turn: rebuilding the segmenter there would drop the open turn,
        and announce it again (a second speech_started with no speech_stopped).
        """
        segmenter, wanted = self._segmenter, self.config.turn_detection
        if wanted is None or self._vad_factory is None:
            self._segmenter = None  # switching VAD off needs an empty buffer (`reconfigure`)
        elif segmenter is None or (segmenter.config != wanted and not segmenter.holding):
            self._make_segmenter()

    def _start_over(self) -> None:
        """The stream starts over (a commit, a clear, a new rate): the segmenter drops what it
        holds, and its timeline is set from the input's clock."""
        if self._segmenter is not None:
            self._segmenter.reset()
            self._segmenter.realign(self._input.clock)

    def _segment(self, audio: Any) -> None:
        assert self._segmenter is not None
        self._apply(self._segmenter.push(audio))
        self._follow_config()

    def _apply(self, ops: list[turns.TurnOp]) -> None:
        for op in ops:
            if isinstance(op, turns.SpeechStarted):
                item = self._open_item()
                self._emit(SpeechStarted(audio_start_ms=op.audio_start_ms, item_id=item.item_id))
                item.start_ms = op.audio_start_ms
            elif isinstance(op, turns.TurnAudio):
                self._add_turn_audio(op.samples)
            elif isinstance(op, turns.Paused | turns.Resumed):
                self._early(op)
            elif isinstance(op, turns.IdleTimeout):
                self._idle_timeout(op)
            elif self._item is not None:
                self._emit(SpeechStopped(audio_end_ms=op.audio_end_ms, item_id=self._item.item_id))
                self._close_item()

    def _idle_timeout(self, op: turns.IdleTimeout) -> None:
        """server_vad's idle_timeout_ms ran out. OpenAI: "The empty audio will be committed to
        the conversation as an input_audio item (there will be a input_audio_buffer.committed
        event)", and it is transcribed as any item ("there may be speech that didn't trigger
        VAD but is still detected by the model")."""
        if self._item is not None:
            return  # a turn is open; the segmenter times out only between turns
        item = self._open_item()
        item.start_ms = op.audio_start_ms
        self._emit(TimeoutTriggered(op.audio_start_ms, op.audio_end_ms, item.item_id))
        cap = min(len(op.samples), self.item_cap_samples)
        self._add_turn_audio(op.samples[len(op.samples) - cap :])
        self._close_item()

    def hold_idle(self) -> None:
        """Stop server_vad's idle timer: the voice agent is answering."""
        self._idle_held = True
        if self._segmenter is not None:
            self._segmenter.hold_idle()

    def arm_idle(self, delay_seconds: float = 0.0) -> None:
        """Run server_vad's idle timer again from `delay_seconds` of audio after what came so
        far: OpenAI applies it "after the last model response's audio has finished playing"."""
        self._idle_held = False
        if self._segmenter is not None:
            self._segmenter.arm_idle(round(delay_seconds * SAMPLE_RATE))

    def _early(self, op: turns.Paused | turns.Resumed) -> None:
        item = self._item
        if item is None:
            return
        if isinstance(op, turns.Paused):
            self._decoder.pause(item)
            return
        self._decoder.resume(item)
        if item.speculated:
            item.speculated = False
            self._emit(TurnResumed(item.item_id))

    def _add_turn_audio(self, audio: Any) -> None:
        """Add a turn's audio; "a turn that reaches the item cap is committed there instead of refused"."""
        while len(audio):
            item = self._open_item()
            room = self.item_cap_samples - item.samples
            piece, audio = audio[:room], audio[room:]
            item.add(piece)
            item.clock = item.samples
            if len(audio):
                end_ms = item.start_ms + item.samples * 1000 // SAMPLE_RATE
                self._emit(SpeechStopped(audio_end_ms=end_ms, item_id=item.item_id))
                self._close_item()
                follow = self._open_item()
                follow.start_ms = end_ms
                self._emit(SpeechStarted(audio_start_ms=end_ms, item_id=follow.item_id))

    # -- items ---------------------------------------------------------------

    @property
    def item_cap_seconds(self) -> float:
        """The smaller of MAX_ITEM_SECONDS and the engine's max_audio_seconds."""
        return min(self.engine.max_item_seconds, self.engine.capabilities.max_audio_seconds)

    @property
    def item_cap_samples(self) -> int:
        return int(self.item_cap_seconds * SAMPLE_RATE)

    def _open_item(self) -> Item:
        if self._item is None:
            self._item = Item(previous_item_id=self._last_item_id)
            self._last_item_id = self._item.item_id
        return self._item

    def _close_item(self) -> None:
        item = self._item
        assert item is not None
        self._item = None
        item.closed = True
        self._decoder.commit(item)
        self._emit(Committed(item_id=item.item_id, previous_item_id=item.previous_item_id))

    @property
    def user_speaking(self) -> bool:
        """A turn is open now: the user is speaking (server VAD)."""
        return self._segmenter is not None and self._segmenter.in_speech

    def buffer_empty(self) -> bool:
        in_turn = self._segmenter is not None and self._segmenter.holding
        return (self._item is None or self._item.clock == 0) and not in_turn and not self._input.carry

    # -- decode work (`decoder.py`) ----------------------------------------------

    @property
    def revisions(self) -> int:
        return self._decoder.revisions

    def take_observations(self) -> list[Observation]:
        """What was observed since the last call (steps coalesced, audio refused), oldest first."""
        taken = list(self._observations)
        self._observations.clear()  # in place: the decoder appends to this list
        return taken

    @property
    def coalesced(self) -> int:
        return self._decoder.coalesced

    def next_job(self) -> StepJob | None:
        """The next step (of the open item, or of a committed one), or None."""
        return self._decoder.next_job(self._item)

    def job_done(self, job: StepJob, result: StepResult) -> None:
        self._decoder.job_done(job, result)

    def job_failed(self, job: StepJob, error: DragomanError) -> None:
        self._decoder.job_failed(job, error)
