"""An agent session's settings, as the client's `session.update` sets them.

Field names follow OpenAI's GA Realtime session (`session.audio.output.voice` is
`voice`, `session.audio.input.turn_detection` is `turn_detection`); the protocol
maps both generations' session objects onto them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dragoman.sessions.speech.config import NoiseReduction
from dragoman.streaming.turns import ServerVADConfig, TurnConfig

#: GA: "`["text"]` can be used to make the model respond with text only. It is not
#: possible to request both `text` and `audio` at the same time." Audio comes with its transcript.
Modality = Literal["audio", "text"]
#: `audio/pcm` (beta `pcm16`), `audio/pcmu` (`g711_ulaw`), `audio/pcma` (`g711_alaw`).
Codec = Literal["pcm16", "pcmu", "pcma"]


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str = ""
    #: The JSON Schema of the arguments.
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ForcedFunction:
    """`tool_choice: {"type": "function", "name": ...}`: the model must call this function."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedFunction


@dataclass(frozen=True)
class InputTranscription:
    """Transcribe the user's audio items (`conversation.item.input_audio_transcription.*`)."""

    model: str | None = None
    language: str | None = None
    prompt: str | None = None


@dataclass(frozen=True)
class TurnDetection:
    """`server_vad` or `semantic_vad`, and what a detected turn does to responses (OpenAI's
    defaults: both on). The speech-duration gates (`min_speech_ms`, and semantic_vad's
    `min_speech_continuation_ms`) are fields of `vad`: a barge-in is a new turn, so it needs
    the full `min_speech_ms` of speech."""

    vad: TurnConfig = field(default_factory=ServerVADConfig)
    #: "Whether or not to automatically generate a response when a VAD stop event occurs."
    create_response: bool = True
    #: "Whether or not to automatically interrupt any ongoing response ... when a VAD start event occurs."
    interrupt_response: bool = True


@dataclass(frozen=True)
class AgentConfig:
    """An agent session's settings; `UpdateSession.values` and response overrides are keyed by its fields."""

    model: str | None = None
    instructions: str = ""
    output_modalities: tuple[Modality, ...] = ("audio",)
    #: None: the server's default voice.
    voice: str | None = None
    #: "0.25 is the minimum speed. 1.5 is the maximum speed."
    speed: float = 1.0
    input_rate: int = 24_000
    output_rate: int = 24_000
    #: The audio's encoding at those rates: PCM16, or G.711 at 8 kHz (telephony).
    input_codec: Codec = "pcm16"
    output_codec: Codec = "pcm16"
    input_transcription: InputTranscription | None = None
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    #: The input's noise reduction (the speech front filters it); None: the audio as it comes.
    noise_reduction: NoiseReduction | None = None
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    #: None: "inf", the most the model allows.
    max_output_tokens: int | None = None
