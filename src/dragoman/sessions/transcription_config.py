"""A transcription session's settings and how they are reported to each client generation."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dragoman.config import TranscriptionSettings
from dragoman.engines.asr import ASRCapabilities, TextTokenizer
from dragoman.errors import InvalidValue
from dragoman.protocol.realtime import Generation, format_for
from dragoman.protocol.realtime_events import SessionEvent, SessionEventType
from dragoman.streaming.turns import ServerVADConfig

if TYPE_CHECKING:
    from dragoman.sessions.transcription import TranscriptionSession

#: The seed's MIN_CHUNK_SECONDS: a shorter chunk_seconds is raised to it.
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
    prompt: str | None = None
    input_rate: int = 16_000
    turn_detection: ServerVADConfig | None = None
    chunk_seconds: float = 2.0
    unfixed_chunks: int = 2
    unfixed_tokens: int = 5

    @classmethod
    def defaults(cls, settings: TranscriptionSettings, generation: Generation) -> SessionConfig:
        # OpenAI's GA audio/pcm is 24 kHz only; the beta default is pcm16 at 16 kHz (the seed).
        return cls(
            input_rate=24_000 if generation is Generation.GA else 16_000,
            chunk_seconds=max(settings.chunk_seconds, MIN_CHUNK_SECONDS),
            unfixed_chunks=settings.unfixed_chunks,
            unfixed_tokens=settings.unfixed_tokens,
        )

    def patched(self, values: dict[str, Any], cap: float) -> SessionConfig:
        """This config with `values` applied, or InvalidValue; nothing changes on error."""
        new = dataclasses.replace(self, **values)
        chunk = max(new.chunk_seconds, MIN_CHUNK_SECONDS)
        if chunk > cap:
            raise InvalidValue(
                f"chunk_seconds must not exceed the item cap of {cap:g} s.",
                param="session.mstar.chunk_seconds",
            )
        return dataclasses.replace(new, chunk_seconds=chunk)


def session_event(session: TranscriptionSession, created: bool) -> SessionEvent:
    """`session.created/updated` (GA) or `transcription_session.created/updated` (beta)."""
    config = session.config
    transcription = {
        "model": config.model or session.engine.name,
        "language": config.language,
        "prompt": config.prompt,
    }
    vad = config.turn_detection
    turn_detection: dict[str, Any] | None = None
    if vad is not None:
        turn_detection = {
            "type": "server_vad",
            "threshold": vad.threshold,
            "prefix_padding_ms": vad.prefix_padding_ms,
            "silence_duration_ms": vad.silence_duration_ms,
        }
    mstar = {
        "chunk_seconds": config.chunk_seconds,
        "unfixed_chunks": config.unfixed_chunks,
        "unfixed_tokens": config.unfixed_tokens,
        "max_item_seconds": session.item_cap_seconds,
    }
    body: dict[str, Any] = {"id": session.session_id, "object": "realtime.transcription_session"}
    if session.generation is Generation.GA:
        kind: SessionEventType = "session.created" if created else "session.updated"
        body |= {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": format_for(Generation.GA, config.input_rate),
                    "transcription": transcription,
                    "turn_detection": turn_detection,
                    "noise_reduction": None,
                }
            },
            "include": None,
        }
    else:
        kind = "transcription_session.created" if created else "transcription_session.updated"
        body |= {
            "modalities": ["text"],
            "input_audio_format": format_for(Generation.BETA, config.input_rate),
            "input_audio_transcription": transcription,
            "turn_detection": turn_detection,
        }
    body["mstar"] = mstar
    return SessionEvent(type=kind, session=body)
