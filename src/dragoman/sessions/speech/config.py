"""A transcription session's settings, and what it knows of the shared engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, TextTokenizer
from dragoman.errors import InvalidValue
from dragoman.streaming.turns import TurnConfig

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
        new = dataclasses.replace(self, **values)
        chunk = max(new.chunk_seconds, MIN_CHUNK_SECONDS)
        if chunk > cap:
            raise InvalidValue(
                f"chunk_seconds must not exceed the item cap of {cap:g} s.",
                param="session.mstar.chunk_seconds",
            )
        return dataclasses.replace(new, chunk_seconds=chunk)
