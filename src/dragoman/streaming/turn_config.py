"""The settings of the two turn-detection modes (`streaming/turns.py` segments by them).

Both modes run on Silero VAD and share the speech-duration gate: a new turn (and so a barge-in)
needs `min_speech_ms` of active speech, 384 ms by default, before it is announced. The
speech-to-speech reference pipeline's defaults: "新轮次和抢话始终要求满 min_speech_ms（默认 384 ms）的活跃语音，
只有接续一个可重开轮次才放宽到 min_speech_continuation_ms（默认 192 ms）" (new turns and barge-ins always
need min_speech_ms of active speech; only continuing a reopenable turn relaxes it to
min_speech_continuation_ms). Neither gate is on OpenAI's wire: they are this server's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

#: Silero's VADIterator ends speech only below threshold - 0.15, so a probability wavering
#: around the threshold does not flap between speech and silence.
HYSTERESIS = 0.15
MIN_SPEECH_MS = 384
MIN_SPEECH_CONTINUATION_MS = 192
#: semantic_vad asks the turn model once a pause in the turn reaches this much silence (low
#: eagerness: twice as much); pipecat runs the same model when Silero has heard 0.2 s of silence
#: (its `stop_secs` for smart-turn).
PAUSE_MS = 200
#: The turn model sees the end of the turn: Smart Turn's input is "the last 8 s".
TURN_CONTEXT_SECONDS = 8
#: server_vad's `idle_timeout_ms` range, as OpenAI's API reference gives it (its SDK's types
#: give none); the upper end also bounds the silent audio a segmenter holds for the item a
#: timeout commits (30 s of 16 kHz audio: 1.9 MB).
MIN_IDLE_TIMEOUT_MS = 5_000
MAX_IDLE_TIMEOUT_MS = 30_000

Eagerness = Literal["low", "medium", "high", "auto"]
#: eagerness -> (threshold on P(complete), the pause at which the model is asked, max timeout),
#: in ms. OpenAI: "low will wait longer for the user to continue speaking, high will respond
#: more quickly. auto is the default and is equivalent to medium. low, medium, and high have max
#: timeouts of 8s, 4s, and 2s respectively." The thresholds and pauses are ours: medium is Smart
#: Turn's own 0.5 (pipecat: "1 for Complete" when "probability > 0.5") at pipecat's 200 ms. On
#: read speech the model is often sure (P > 0.7) at a comma's pause, so a threshold alone
#: barely changes how often a turn is cut; low also waits for a 400 ms pause (bench/turn_detection.py).
EAGERNESS: dict[str, tuple[float, int, int]] = {
    "low": (0.7, 2 * PAUSE_MS, 8000),
    "medium": (0.5, PAUSE_MS, 4000),
    "high": (0.3, PAUSE_MS, 2000),
}


def _check_vad(threshold: float, prefix_padding_ms: int, min_speech_ms: int) -> None:
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be within [0, 1], got {threshold}")
    if prefix_padding_ms < 0:
        raise ValueError(f"prefix_padding_ms must be >= 0, got {prefix_padding_ms}")
    if min_speech_ms < 0:
        raise ValueError(f"min_speech_ms must be >= 0, got {min_speech_ms}")


@dataclass(frozen=True)
class ServerVADConfig:
    """OpenAI's `server_vad` settings, with OpenAI's defaults, and the new-turn gate."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    min_speech_ms: int = MIN_SPEECH_MS
    #: OpenAI: "Optional timeout after which a model response will be triggered automatically";
    #: None: off. The segmenter runs it on the audio timeline (`turns.IdleTimeout`).
    idle_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        _check_vad(self.threshold, self.prefix_padding_ms, self.min_speech_ms)
        if self.silence_duration_ms < 0:
            raise ValueError(f"silence_duration_ms must be >= 0, got {self.silence_duration_ms}")
        idle = self.idle_timeout_ms
        if idle is not None and not MIN_IDLE_TIMEOUT_MS <= idle <= MAX_IDLE_TIMEOUT_MS:
            raise ValueError(
                f"idle_timeout_ms must be within [{MIN_IDLE_TIMEOUT_MS}, {MAX_IDLE_TIMEOUT_MS}], got {idle}"
            )

    @property
    def negative_threshold(self) -> float:
        """Below this a window counts as silence (floored like Silero's get_speech_timestamps)."""
        return max(self.threshold - HYSTERESIS, 0.01)


@dataclass(frozen=True)
class SemanticVADConfig:
    """OpenAI's `semantic_vad` settings, and the gates.

    OpenAI's semantic_vad takes no VAD settings; the VAD it runs "in conjunction with" uses
    server_vad's defaults (`threshold`, `prefix_padding_ms`).
    """

    eagerness: Eagerness = "auto"
    min_speech_ms: int = MIN_SPEECH_MS
    min_speech_continuation_ms: int = MIN_SPEECH_CONTINUATION_MS
    threshold: float = 0.5
    prefix_padding_ms: int = 300

    def __post_init__(self) -> None:
        if self.eagerness != "auto" and self.eagerness not in EAGERNESS:
            raise ValueError(f"eagerness must be low, medium, high or auto, got {self.eagerness!r}")
        _check_vad(self.threshold, self.prefix_padding_ms, self.min_speech_ms)
        if self.min_speech_continuation_ms < 0:
            raise ValueError(
                f"min_speech_continuation_ms must be >= 0, got {self.min_speech_continuation_ms}"
            )

    @property
    def negative_threshold(self) -> float:
        return max(self.threshold - HYSTERESIS, 0.01)

    @property
    def _mapping(self) -> tuple[float, int, int]:
        return EAGERNESS["medium" if self.eagerness == "auto" else self.eagerness]

    @property
    def completion_threshold(self) -> float:
        """At a pause, P(complete) at or above this ends the turn at once."""
        return self._mapping[0]

    @property
    def pause_ms(self) -> int:
        """The silence in a turn at which the turn model is asked."""
        return self._mapping[1]

    @property
    def max_wait_ms(self) -> int:
        """The longest silence a turn may hold: OpenAI's max timeout for the eagerness."""
        return self._mapping[2]

    def wait_ms(self, probability: float) -> int:
        """How much silence ends the turn, given P(complete) at its pause: the "timeout based on
        this probability". From the pause (at once) at the threshold up to the max timeout at
        P = 0, linearly between; the wait runs from the start of the silence."""
        threshold, pause, longest = self._mapping
        if probability >= threshold:
            return pause
        doubt = 1.0 - max(probability, 0.0) / threshold
        return round(pause + (longest - pause) * doubt)


TurnConfig: TypeAlias = ServerVADConfig | SemanticVADConfig
