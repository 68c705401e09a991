"""A transcription session's settings, and what it knows of the shared engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, TextTokenizer
from dragoman.errors import InvalidValue
from dragoman.streaming.turns import TurnConfig

NoiseReductionType = Literal["near_field", "far_field"]

#: MIN_CHUNK_SECONDS of the re-decode algorithm: a shorter chunk_seconds is raised to it.
MIN_CHUNK_SECONDS = 0.5


@dataclass(frozen=True)
class EngineProfile:
    """What a session needs to know of the shared engine (it never calls the engine itself)."""

    name: str
    capabilities: ASRCapabilities
    tokenizer: TextTokenizer
    #: The server's MAX_ITEM_SECONDS.
    max_item_seconds: float


@dataclass(frozen=True)
class NoiseReduction:
    """OpenAI's `audio.input.noise_reduction`: it "filters audio added to the input audio buffer
    before it is sent to VAD and the model" (`streaming/noise_reduction.py`)."""

    type: NoiseReductionType
    #: OpenAI: "Defaults to 1 when noise reduction is first enabled."
    strength: float = 1.0


@dataclass(frozen=True)
class NoiseReductionUpdate:
    """As a session update sends it: a strength left out "preserves the current strength"."""

    type: NoiseReductionType
    strength: float | None = None

    def applied_to(self, current: NoiseReduction | None) -> NoiseReduction:
        if self.strength is not None:
            return NoiseReduction(self.type, self.strength)
        return NoiseReduction(self.type, current.strength if current is not None else 1.0)


def with_noise_reduction(values: Mapping[str, Any], current: NoiseReduction | None) -> dict[str, Any]:
    """An update's `values` with its `noise_reduction` (a `NoiseReductionUpdate`, or None to turn
    it off) resolved against the session's `current` setting."""
    out = dict(values)
    update = out.get("noise_reduction")
    if isinstance(update, NoiseReductionUpdate):
        out["noise_reduction"] = update.applied_to(current)
    return out


@dataclass(frozen=True)
class SessionConfig:
    model: str | None = None
    language: str | None = None
    #: With `language` open: the languages the speech may be in (empty: any), detected among.
    detect_among: tuple[str, ...] = ()
    prompt: str | None = None
    input_rate: int = 16_000
    #: server_vad or semantic_vad; None: the client commits its turns.
    turn_detection: TurnConfig | None = None
    chunk_seconds: float = 2.0
    unfixed_chunks: int = 2
    unfixed_tokens: int = 5
    #: Before unfixed_chunks steps, firm up the whole words two consecutive steps agree on
    #: (`agreed_prefix`): the interpreter's first source words without waiting for the third step.
    agree_early: bool = False
    #: The re-decode window's bound (`dragoman.streaming.sealing`); 0: no sealing.
    max_window_seconds: float = 10.0
    #: Whose ASR routes the steps take too (`StepRequest.scope`); "": the server's only.
    asr_scope: str = ""
    #: The input's noise reduction; None: the audio as it comes.
    noise_reduction: NoiseReduction | None = None

    @classmethod
    def defaults(cls, settings: TranscriptionSettings, input_rate: int) -> SessionConfig:
        """The server's settings; `input_rate` is the client protocol's default format."""
        return cls(
            input_rate=input_rate,
            chunk_seconds=max(settings.chunk_seconds, MIN_CHUNK_SECONDS),
            unfixed_chunks=settings.unfixed_chunks,
            unfixed_tokens=settings.unfixed_tokens,
            max_window_seconds=settings.max_window_seconds,
        )

    def patched(self, values: Mapping[str, Any], cap: float) -> SessionConfig:
        """This config with `values` applied, or InvalidValue; nothing changes on error."""
        new = dataclasses.replace(self, **with_noise_reduction(values, self.noise_reduction))
        chunk = max(new.chunk_seconds, MIN_CHUNK_SECONDS)
        if chunk > cap:
            raise InvalidValue(
                f"chunk_seconds must not exceed the item cap of {cap:g} s.",
                param="session.mstar.chunk_seconds",
            )
        return dataclasses.replace(new, chunk_seconds=chunk)
