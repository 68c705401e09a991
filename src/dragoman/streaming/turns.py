"""Server-VAD turn segmentation: where a user's turn starts and stops in a stream of audio.

The Realtime transcription session: `{"type": "server_vad", "threshold", "prefix_padding_ms", "silence_duration_ms"}`
"lets the server end [an utterance], adding input_audio_buffer.speech_started / .speech_stopped
events with audio_start_ms / audio_end_ms on the session's audio timeline".

The segmenter is pure: audio in, operations out, no clock and no I/O. It scores fixed windows
with a `SpeechProbability` and emits, in timeline order:

- `SpeechStarted` when a window scores at or above `threshold`. The turn begins
  `prefix_padding_ms` before that window (less when the stream, or the audio since the last
  turn or reset, is shorter). OpenAI: audio_start_ms "will correspond to the beginning of audio
  sent to the model, and thus includes the prefix_padding_ms".
- `TurnAudio` with the turn's samples, in order: the padding, the speech, and the silence up to
  the stop point. Audio outside turns is never emitted.
- `SpeechStopped` once `silence_duration_ms` of audio has gone by since the first window below
  `threshold - 0.15` with no window at or above `threshold` in between (the hysteresis of
  Silero's own VADIterator: windows between the two thresholds neither start nor break a
  silence). audio_end_ms is the end of the window that completed the silence, i.e. the end of
  the turn's audio, so the turn spans exactly [audio_start_ms, audio_end_ms). OpenAI:
  audio_end_ms "will correspond to the end of audio sent to the model, and thus includes the
  min_silence_duration_ms".

Times are whole milliseconds (rounded down) since the start of the timeline: `offset_samples`
plus every sample pushed, including those a `reset()` dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.vad import SpeechProbability

#: Silero's VADIterator ends speech only below threshold - 0.15, so a probability wavering
#: around the threshold does not flap between speech and silence.
HYSTERESIS = 0.15


@dataclass(frozen=True)
class ServerVADConfig:
    """OpenAI's `server_vad` settings, with OpenAI's defaults."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {self.threshold}")
        if self.prefix_padding_ms < 0:
            raise ValueError(f"prefix_padding_ms must be >= 0, got {self.prefix_padding_ms}")
        if self.silence_duration_ms < 0:
            raise ValueError(f"silence_duration_ms must be >= 0, got {self.silence_duration_ms}")

    @property
    def negative_threshold(self) -> float:
        """Below this a window counts as silence (floored like Silero's get_speech_timestamps)."""
        return max(self.threshold - HYSTERESIS, 0.01)


@dataclass(frozen=True)
class SpeechStarted:
    audio_start_ms: int


@dataclass(frozen=True, eq=False)
class TurnAudio:
    """The next samples of the current turn (a fresh array, owned by the receiver)."""

    samples: NDArray[np.float32]


@dataclass(frozen=True)
class SpeechStopped:
    audio_end_ms: int


TurnOp: TypeAlias = SpeechStarted | TurnAudio | SpeechStopped


class TurnSegmenter:
    """Split a stream of 16 kHz float32 audio into turns (see the module docstring)."""

    def __init__(
        self,
        config: ServerVADConfig,
        vad: SpeechProbability,
        sample_rate: int = SAMPLE_RATE,
        offset_samples: int = 0,
    ) -> None:
        if sample_rate <= 0 or offset_samples < 0:
            raise ValueError("sample_rate must be positive and offset_samples non-negative")
        self.config = config
        self.vad = vad
        self.sample_rate = sample_rate
        self._window = vad.window_samples
        self._padding = config.prefix_padding_ms * sample_rate // 1000
        self._silence = config.silence_duration_ms * sample_rate // 1000
        # Timeline position of the next window's first sample; the leftover starts there.
        self._cursor = offset_samples
        self._leftover = np.zeros(0, dtype=np.float32)
        # Up to `_padding` of the latest audio outside a turn, as whole windows.
        self._ring: deque[NDArray[np.float32]] = deque()
        self._ring_samples = 0
        self._in_speech = False
        # Where the current run of silence inside a turn began, if one is running.
        self._silence_start: int | None = None

    @property
    def in_speech(self) -> bool:
        return self._in_speech

    @property
    def position(self) -> int:
        """Timeline position (in samples) just past the last sample pushed."""
        return self._cursor + len(self._leftover)

    def ms(self, samples: int) -> int:
        """A timeline position in whole milliseconds, rounded down."""
        return samples * 1000 // self.sample_rate

    def reset(self) -> None:
        """Drop the current turn, the unscored leftover and the VAD's state; keep the timeline.

        For an input_audio_buffer.clear: the dropped audio still counts on the timeline, and the
        next turn's padding cannot reach back before this point.
        """
        self._cursor += len(self._leftover)
        self._leftover = np.zeros(0, dtype=np.float32)
        self._ring.clear()
        self._ring_samples = 0
        self._in_speech = False
        self._silence_start = None
        self.vad.reset()

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
        if not self._in_speech:
            if prob >= self.config.threshold:
                padding = self._take_padding()
                ops.append(SpeechStarted(self.ms(start - len(padding))))
                pieces.extend((padding, window))
                self._in_speech = True
                self._silence_start = None
            else:
                self._remember(window)
            return
        pieces.append(window)
        if prob >= self.config.threshold:
            self._silence_start = None
        elif prob < self.config.negative_threshold and self._silence_start is None:
            self._silence_start = start
        if self._silence_start is not None and self._cursor - self._silence_start >= self._silence:
            _flush(ops, pieces)
            ops.append(SpeechStopped(self.ms(self._cursor)))
            self._in_speech = False
            self._silence_start = None

    def _remember(self, window: NDArray[np.float32]) -> None:
        """Keep `window` as possible padding, forgetting windows no padding can reach."""
        if self._padding == 0:
            return
        self._ring.append(window.copy())
        self._ring_samples += len(window)
        while self._ring_samples - len(self._ring[0]) >= self._padding:
            self._ring_samples -= len(self._ring.popleft())

    def _take_padding(self) -> NDArray[np.float32]:
        """The last `_padding` samples before the current window (fewer if not yet heard)."""
        if not self._ring:
            return np.zeros(0, dtype=np.float32)
        held = np.concatenate(self._ring)
        self._ring.clear()
        self._ring_samples = 0
        return held[len(held) - min(self._padding, len(held)) :]


def _flush(ops: list[TurnOp], pieces: list[NDArray[np.float32]]) -> None:
    """Close the pending run of turn audio as one `TurnAudio` (a copy, owned by the receiver)."""
    if pieces:
        ops.append(TurnAudio(np.concatenate(pieces)))
        pieces.clear()
