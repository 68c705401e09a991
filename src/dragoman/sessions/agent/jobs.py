"""The engine jobs of an agent session, one kind per lane, and the lanes' names.

A voice agent uses three engines at once, each on its own lane (`sessions/base.py`):
the speech front's transcription steps on `ASR`, the response's generation on
`LLM`, and its clauses' speech on `TTS`. LLM and TTS jobs stream: tokens and audio
chunks come back as the engine makes them. Each carries the response generation
it was made for, so the session can drop what a superseded response still sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dragoman.engines.llm.base import ChatRequest
from dragoman.engines.workers import CancelToken, Priority

ASR = "asr"
LLM = "llm"
TTS = "tts"
LANES = (ASR, LLM, TTS)


@dataclass(frozen=True)
class SpeakRequest:
    """One clause to speak, as PCM16 at the client's output rate."""

    text: str
    #: A voice name the server's catalog knows (`engines/tts/voices.py`).
    voice: str
    speed: float
    rate: int


@dataclass(frozen=True)
class LLMJob:
    request: ChatRequest
    response_id: str
    generation: int
    cancel: CancelToken = field(default_factory=CancelToken, compare=False)
    priority: Priority = Priority.INTERACTIVE
    streaming: bool = True


@dataclass(frozen=True)
class SpeechJob:
    request: SpeakRequest
    response_id: str
    generation: int
    #: The clause's place in its response (0 first).
    index: int
    cancel: CancelToken = field(default_factory=CancelToken, compare=False)
    priority: Priority = Priority.INTERACTIVE
    streaming: bool = True
