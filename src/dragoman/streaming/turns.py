"""Turn segmentation: where a user's turn starts and stops in a stream of audio.

Two modes, as OpenAI's Realtime `turn_detection`:

- `server_vad` (`ServerVADConfig`) "lets the server end [an utterance], adding
  input_audio_buffer.speech_started / .speech_stopped events with audio_start_ms /
  audio_end_ms on the session's audio timeline" after `silence_duration_ms` of silence.
- `semantic_vad` (`SemanticVADConfig`) "uses a turn detection model (in conjunction with VAD)
  to semantically estimate whether the user has finished speaking, then dynamically sets a
  timeout based on this probability".

The segmenter is pure: audio in, operations out, no clock and no I/O. It scores fixed windows
with a `SpeechProbability` (and, for semantic_vad, whole turns with a `TurnCompletion`) and
emits, in timeline order:

- `SpeechStarted` once a candidate turn holds `min_speech_ms` of active speech (windows at or
  above `threshold`; 384 ms by default, so a cough or a click opens no turn and barges into no
  response). The turn still begins `prefix_padding_ms` before its first speech window (less
  when the stream, or the audio since the last turn or reset, is shorter): the candidate's
  audio is held, never lost. OpenAI: audio_start_ms "will correspond to the beginning of audio
  sent to the model, and thus includes the prefix_padding_ms". A candidate is dropped (its
  audio left outside turns) once it has been quiet, below `threshold`, for as long as would
  first end a turn: `silence_duration_ms` (server_vad) or the pause (semantic_vad); speech soon
  after may recall it, a short word set off by a pause (`streaming/turn_onset.py`).
- `TurnAudio` with the turn's samples, in order: the padding, the speech, and the silence up to
  the stop point. Audio outside turns is never emitted.
- `SpeechStopped` when the turn ends; audio_end_ms is the end of the window that ended it, so
  the turn spans exactly [audio_start_ms, audio_end_ms). OpenAI: audio_end_ms "will correspond
  to the end of audio sent to the model, and thus includes the min_silence_duration_ms".

Silence in a turn runs from the first window below `threshold - 0.15` with no window at or
above `threshold` since (the hysteresis of Silero's own VADIterator: windows between the two
thresholds neither start nor break a silence). server_vad ends the turn once the silence
reaches `silence_duration_ms`. semantic_vad asks the turn model once, when the silence reaches
the eagerness's pause (`PAUSE_MS`, 200 ms; low: 400 ms), on the turn's last
`TURN_CONTEXT_SECONDS`: at P(complete) >= the eagerness's threshold the turn ends there;
otherwise the turn is soft-ended and waits `SemanticVADConfig.wait_ms(P)` of silence, from the
pause's start, before it ends. The model is not asked again as that pause grows.

A soft-ended turn is the one reopenable turn: it is neither stopped nor committed, so speech
resuming in its wait continues it, unseen on the wire (no event, the same item). Resuming needs
only `min_speech_continuation_ms` (192 ms) of active speech; shorter speech leaves the wait
running. The turn model is asked again at the next pause. A turn that has stopped is
committed, and OpenAI's protocol cannot reopen a committed item: speech after it is a new turn
(or a barge-in) and always needs the full `min_speech_ms`.

With `pauses` on (the early start of the voice agent and the interpreter) either mode keeps its
own end of turn, and also emits `Paused` the moment a silence begins in the open turn, so the
turn can be transcribed and an answer prepared while the silence runs out (server_vad's 500 ms,
or semantic_vad's pause and the turn model's call); the first window of speech after it emits
`Resumed`, in a soft-ended turn too, even speech too short to resume it: the pause's transcript
no longer holds all the turn's speech. (A turn model judging the pause at `PAUSE_MS` before the
decode came too late for server_vad: the transcript arrived after its 500 ms had ended the
turn.)

server_vad's `idle_timeout_ms` (`streaming/idle_timer.py`) runs on the audio timeline, as
everything here does: from the start, from the end of each turn, and from each start-over
(`reset()`), a span of that much audio with no turn in it emits `IdleTimeout` with the span's
bounds and its audio. A caller with answers of its own (the voice agent) holds it while it
answers (`hold_idle()`) and starts it again where its answer's audio will have finished playing
(`arm_idle(delay)`).

Times are whole milliseconds (rounded down) since the start of the timeline: `offset_samples`
plus every sample pushed, including those a `reset()` dropped, or where `realign()` put it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.vad import SpeechProbability
from dragoman.streaming.idle_timer import IdleTimer
from dragoman.streaming.recent_audio import RecentAudio
from dragoman.streaming.turn_config import (
    EAGERNESS,
    HYSTERESIS,
    MIN_SPEECH_CONTINUATION_MS,
    MIN_SPEECH_MS,
    PAUSE_MS,
    TURN_CONTEXT_SECONDS,
    Eagerness,
    SemanticVADConfig,
    ServerVADConfig,
    TurnConfig,
)
from dragoman.streaming.turn_onset import SpeechRun, TurnOnset
from dragoman.streaming.turn_ops import (
    IdleTimeout,
    Paused,
    Resumed,
    SpeechStarted,
    SpeechStopped,
    TurnAudio,
    TurnCompletion,
    TurnOp,
)

__all__ = [
    "EAGERNESS",
    "HYSTERESIS",
    "MIN_SPEECH_CONTINUATION_MS",
    "MIN_SPEECH_MS",
    "PAUSE_MS",
    "TURN_CONTEXT_SECONDS",
    "Eagerness",
    "IdleTimeout",
    "Paused",
    "Resumed",
    "SemanticVADConfig",
    "ServerVADConfig",
    "SpeechStarted",
    "SpeechStopped",
    "TurnAudio",
    "TurnCompletion",
    "TurnConfig",
    "TurnOp",
    "TurnSegmenter",
]


class TurnSegmenter:
    """Split a stream of 16 kHz float32 audio into turns (see the module docstring)."""

    def __init__(
        self,
        config: TurnConfig,
        vad: SpeechProbability,
        sample_rate: int = SAMPLE_RATE,
        offset_samples: int = 0,
        turn_model: TurnCompletion | None = None,
        pauses: bool = False,
    ) -> None:
        """`turn_model`: semantic_vad's (server_vad asks none). `pauses`: emit `Paused` and
        `Resumed` (the early start)."""
        if sample_rate <= 0 or offset_samples < 0:
            raise ValueError("sample_rate must be positive and offset_samples non-negative")
        self.semantic = isinstance(config, SemanticVADConfig)
        if self.semantic and turn_model is None:
            raise ValueError("semantic_vad needs a turn model")
        self.config = config
        self.vad = vad
        self.turn_model = turn_model if self.semantic else None
        self._pauses = pauses
        self.sample_rate = sample_rate
        self._window = vad.window_samples
        if isinstance(config, SemanticVADConfig):
            self._pause = self._samples(config.pause_ms)
            self._resume_gate = self._samples(config.min_speech_continuation_ms)
            self._silence = self._pause  # the first point a turn may end
        else:
            self._pause = self._resume_gate = 0
            self._silence = self._samples(config.silence_duration_ms)
        # Timeline position of the next window's first sample; the leftover starts there.
        self._cursor = offset_samples
        self._leftover = np.zeros(0, dtype=np.float32)
        padding, gate = self._samples(config.prefix_padding_ms), self._samples(config.min_speech_ms)
        self._onset = TurnOnset(padding, gate, self._silence)
        self._in_speech = False
        # Where the current run of silence inside a turn began, if one is running.
        self._silence_start: int | None = None
        # semantic_vad: the silence that ends a soft-ended turn, and speech that may resume it.
        self._wait: int | None = None
        self._resume = SpeechRun()
        # semantic_vad: the end of the open turn's audio, for the turn model.
        self._context = RecentAudio(TURN_CONTEXT_SECONDS * sample_rate)
        # With pauses: a `Paused` is out, and no speech has come since.
        self._paused = False
        # server_vad's idle timeout (a length of 0 is off).
        idle_ms = config.idle_timeout_ms if isinstance(config, ServerVADConfig) else None
        self._idle = IdleTimer(self._samples(idle_ms) if idle_ms else 0, offset_samples)

    def _samples(self, ms: int) -> int:
        return ms * self.sample_rate // 1000

    @property
    def in_speech(self) -> bool:
        """A turn is open (its SpeechStarted is out)."""
        return self._in_speech

    @property
    def holding(self) -> bool:
        """A turn is open, or a candidate turn holds audio not yet emitted."""
        return self._in_speech or self._onset.candidate is not None

    @property
    def position(self) -> int:
        """Timeline position (in samples) just past the last sample pushed."""
        return self._cursor + len(self._leftover)

    def ms(self, samples: int) -> int:
        """A timeline position in whole milliseconds, rounded down."""
        return samples * 1000 // self.sample_rate

    def reset(self) -> None:
        """Drop the current turn (or candidate), the unscored leftover and the VAD's state; keep
        the timeline.

        For an input_audio_buffer.clear: the dropped audio still counts on the timeline, and the
        next turn's padding cannot reach back before this point.
        """
        self._cursor += len(self._leftover)
        self._leftover = np.zeros(0, dtype=np.float32)
        self._onset.reset()
        self._end_turn()
        self.vad.reset()
        self._idle.start_over(self._cursor)

    def realign(self, position: int) -> None:
        """Put the next sample pushed at `position` on the timeline (in samples), right after a
        `reset()`.

        For a caller that keeps its own clock: audio resampled on the way in reaches the
        segmenter a few samples late, and a clear drops what the resampler held, so after
        every start-over the caller sets the timeline from the input's clock.
        """
        if position < 0:
            raise ValueError("position must be non-negative")
        if self.holding or len(self._leftover) or not self._onset.empty():
            raise ValueError("realign() is for a segmenter that holds nothing: reset() it first")
        self._idle.shift(position - self._cursor)
        self._cursor = position

    def hold_idle(self) -> None:
        """Stop the idle timer until `arm_idle` (the caller is answering)."""
        self._idle.hold()

    def arm_idle(self, delay_samples: int = 0) -> None:
        """Run the idle timer from `delay_samples` past the audio pushed so far (where the
        caller's answer will have finished playing); nothing when the config has no timeout."""
        self._idle.arm(self._cursor + max(delay_samples, 0))

    def open_candidate(self) -> list[TurnOp]:
        """Announce a candidate turn short of its gate now (the client commits the buffer, which
        says its audio counts); returns its SpeechStarted and audio, or nothing."""
        ops: list[TurnOp] = []
        pieces: list[NDArray[np.float32]] = []
        if self._onset.candidate is not None:
            self._open(ops, pieces)
        _flush(ops, pieces)
        return ops

    def push(self, audio: NDArray[np.float32]) -> list[TurnOp]:
        """Add audio of any length; returns the operations it completes, in timeline order.

        Audio short of a whole window waits for the next push. Consecutive turn audio within
        one push comes out as one `TurnAudio`.
        """
        samples = np.asarray(audio, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected mono audio as a 1-D array, got shape {samples.shape}")
        buffer = np.concatenate((self._leftover, samples)) if len(self._leftover) else samples
        whole = len(buffer) - len(buffer) % self._window
        ops: list[TurnOp] = []
        pieces: list[NDArray[np.float32]] = []
        for begin in range(0, whole, self._window):
            self._step(buffer[begin : begin + self._window], ops, pieces)
        _flush(ops, pieces)
        # Copied so the caller's array (a view of which this might be) can be reused.
        self._leftover = buffer[whole:].copy()
        return ops

    def _step(
        self, window: NDArray[np.float32], ops: list[TurnOp], pieces: list[NDArray[np.float32]]
    ) -> None:
        """Score one window and advance the state machine."""
        start = self._cursor
        self._cursor += self._window
        prob = self.vad(window)
        speech = prob >= self.config.threshold
        if not self._in_speech:
            if self._onset.step(window, start, self._cursor, speech):
                self._open(ops, pieces)
            if self._idle.since is not None:
                self._step_idle(window, start, ops, pieces)
            return
        pieces.append(window)
        if self.turn_model is not None:
            self._context.add(window.copy())
        if self._wait is not None:
            self._step_soft_ended(start, speech, ops, pieces)
            return
        if speech:
            self._silence_start = None
            self._speech_again(ops, pieces)
        elif prob < self.config.negative_threshold and self._silence_start is None:
            self._silence_start = start
            if self._pauses:
                self._paused = True
                _flush(ops, pieces)
                ops.append(Paused(self.ms(self._cursor)))
        if self._silence_start is None:
            return
        silence = self._cursor - self._silence_start
        if not self.semantic and silence >= self._silence:
            self._stop(ops, pieces)
        elif self.semantic and silence >= self._pause:
            self._judge(ops, pieces)

    def _step_idle(
        self, window: NDArray[np.float32], start: int, ops: list[TurnOp], pieces: list[NDArray[np.float32]]
    ) -> None:
        """Outside a turn: keep the window for the idle span, and end the span once it is as long
        as the timeout (never while a candidate turn may still open)."""
        span = self._idle.add(window, start, self._cursor, may_end=not self._onset.pending)
        if span is not None:
            begin, audio = span
            _flush(ops, pieces)
            ops.append(IdleTimeout(self.ms(begin), self.ms(self._cursor), audio))

    def _open(self, ops: list[TurnOp], pieces: list[NDArray[np.float32]]) -> None:
        candidate = self._onset.take()
        self._idle.stop()
        ops.append(SpeechStarted(self.ms(candidate.first)))
        pieces.extend(candidate.held)
        if self.turn_model is not None:
            for piece in candidate.held:
                self._context.add(piece)
        self._in_speech = True
        self._silence_start = None

    def _judge(self, ops: list[TurnOp], pieces: list[NDArray[np.float32]]) -> None:
        """semantic_vad at a pause: end the turn, or soft-end it with a timeout from P(complete)."""
        assert isinstance(self.config, SemanticVADConfig)
        probability = self._turn_probability()
        if probability >= self.config.completion_threshold:
            self._stop(ops, pieces)
        else:
            self._wait = self._samples(self.config.wait_ms(probability))
            self._resume = SpeechRun()

    def _turn_probability(self) -> float:
        assert self.turn_model is not None
        return self.turn_model(self._context.latest())

    def _step_soft_ended(
        self, start: int, speech: bool, ops: list[TurnOp], pieces: list[NDArray[np.float32]]
    ) -> None:
        """A soft-ended turn: resumed by `min_speech_continuation_ms` of speech, else timed out."""
        assert self._wait is not None and self._silence_start is not None
        if speech:
            self._speech_again(ops, pieces)
        self._resume.add(speech, start, self._window)
        if self._resume.active >= max(self._resume_gate, 1):
            self._silence_start = self._wait = None
            return
        if self._resume.quiet(self._cursor) >= self._pause:
            self._resume = SpeechRun()  # speech too short to resume the turn is forgotten
        # Speech still deciding whether it resumes the turn holds the timeout (192 ms at most),
        # so that a turn never ends inside it and splits it.
        resuming = self._resume.active > 0 and self._resume.quiet_since is None
        if self._cursor - self._silence_start >= self._wait and not resuming:
            self._stop(ops, pieces)

    def _speech_again(self, ops: list[TurnOp], pieces: list[NDArray[np.float32]]) -> None:
        """Speech in the open turn: a `Paused` out for it is over."""
        if self._paused:
            self._paused = False
            _flush(ops, pieces)
            ops.append(Resumed())

    def _stop(self, ops: list[TurnOp], pieces: list[NDArray[np.float32]]) -> None:
        _flush(ops, pieces)
        ops.append(SpeechStopped(self.ms(self._cursor)))
        self._end_turn()
        self._idle.turn_ended(self._cursor)

    def _end_turn(self) -> None:
        self._in_speech = False
        self._silence_start = self._wait = None
        self._resume = SpeechRun()
        self._context.clear()
        self._paused = False


def _flush(ops: list[TurnOp], pieces: list[NDArray[np.float32]]) -> None:
    """Close the pending run of turn audio as one `TurnAudio` (a copy, owned by the receiver)."""
    if pieces:
        ops.append(TurnAudio(np.concatenate(pieces)))
        pieces.clear()
