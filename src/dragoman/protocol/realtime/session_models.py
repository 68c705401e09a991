"""The `session` object of a Realtime session update, in both generations, for both sessions.

GA (`openai.types.realtime`) nests the audio settings: `session.audio.input.{format,
transcription, turn_detection, noise_reduction}` and `session.audio.output.{format, voice,
speed}`, and names the kind of session in `session.type` ("transcription" or "realtime").
Beta (`openai.types.beta.realtime`) writes them flat: `input_audio_format`,
`input_audio_transcription`, `input_audio_noise_reduction`, `turn_detection`, `voice`,
`modalities`.

Each model's `values()` is what the update sets, keyed by the session's config
fields (`sessions.transcription.config.SessionConfig`, `sessions.agent.config.AgentConfig`);
fields the client left out are left out, so that an update changes only what it names
(the models' defaults are never read).

The unfixed counts are non-negative integers, and numeric strings count as
numbers; language and prompt are strings or null, language at most
MAX_LANGUAGE_CHARS characters. Any other value is an error, and the update
changes nothing. The fields' value types and their checks are in
`protocol.realtime.session_fields`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from dragoman.protocol.realtime.fields import (
    AgentFormat,
    AudioFormat,
    ClientModel,
    Count,
    Number,
    TranscriptionFormat,
    UnitInterval,
)
from dragoman.protocol.realtime.generation import AGENT_PCM16_RATE, GA_RATE, TRANSCRIPTION_PCM16_RATE
from dragoman.protocol.realtime.session_fields import (
    MAX_LANGUAGE_CHARS,
    MAX_PROMPT_CHARS,
    BetaToolChoice,
    GAToolChoice,
    IdleMs,
    Instructions,
    MaxTokens,
    Modalities,
    Model,
    NoiseReductionField,
    RealtimeKind,
    Speed,
    Tools,
    TranscriptionKind,
    TurnEagerness,
    TurnType,
    VadMs,
    Voice,
    modalities,
    present,
    tool_choice,
)
from dragoman.sessions.agent.config import AgentConfig, InputTranscription, TurnDetection
from dragoman.streaming.turns import SemanticVADConfig, ServerVADConfig, TurnConfig

# -- shared parts -----------------------------------------------------------------


class TurnDetectionModel(ClientModel):
    """`server_vad` or `semantic_vad`; a field left out or null takes OpenAI's default.

    Each mode ignores the other's fields: OpenAI's threshold, prefix_padding_ms and
    silence_duration_ms are "Used only for `server_vad` mode", eagerness "only for
    `semantic_vad` mode", and "Idle timeout is currently only supported for `server_vad`
    mode".
    """

    type: TurnType = "server_vad"
    threshold: UnitInterval | None = None
    prefix_padding_ms: VadMs | None = None
    silence_duration_ms: VadMs | None = None
    idle_timeout_ms: IdleMs | None = None
    eagerness: TurnEagerness | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None

    def vad(self) -> TurnConfig:
        if self.type == "semantic_vad":
            # "auto is the default and is equivalent to medium."
            return SemanticVADConfig(eagerness=self.eagerness or "auto")
        defaults = ServerVADConfig()
        return ServerVADConfig(
            threshold=defaults.threshold if self.threshold is None else self.threshold,
            prefix_padding_ms=(
                defaults.prefix_padding_ms if self.prefix_padding_ms is None else self.prefix_padding_ms
            ),
            silence_duration_ms=(
                defaults.silence_duration_ms if self.silence_duration_ms is None else self.silence_duration_ms
            ),
            idle_timeout_ms=self.idle_timeout(),
        )

    def idle_timeout(self) -> int | None:
        return self.idle_timeout_ms

    def turn_detection(self) -> TurnDetection:
        return TurnDetection(
            vad=self.vad(),
            create_response=self.create_response is not False,
            interrupt_response=self.interrupt_response is not False,
        )


class BetaTurnDetectionModel(TurnDetectionModel):
    """Beta's turn_detection, which has no idle_timeout_ms: a beta client's is ignored, as any
    field beta does not know is."""

    idle_timeout_ms: Any = None

    def idle_timeout(self) -> None:
        return None  # whatever a beta client sent: not read, so never checked


class TranscriptionModel(ClientModel):
    model: Model | None = None
    language: Annotated[str, Field(max_length=MAX_LANGUAGE_CHARS)] | None = None
    prompt: Annotated[str, Field(max_length=MAX_PROMPT_CHARS)] | None = None

    def values(self) -> dict[str, Any]:
        """A transcription session's partial update: an empty language or prompt is none."""
        values = present(self, {"model": "model", "language": "language", "prompt": "prompt"})
        for key in ("language", "prompt"):
            if key in values:
                values[key] = values[key] or None
        return values

    def input_transcription(self) -> InputTranscription:
        return InputTranscription(self.model, self.language or None, self.prompt or None)


def _transcription_values(value: TranscriptionModel | None) -> dict[str, Any]:
    """null turns the settings off: the engine's model, any language, no prompt."""
    return {"model": None, "language": None, "prompt": None} if value is None else value.values()


#: The event a client asks for with `session.mstar.partials` or in `session.include`.
PARTIAL_EVENT = "mstar.transcription.partial"


class Mstar(ClientModel):
    """This server's extension (`session.mstar`): the re-decode algorithm's settings, and
    whether to send each step's whole hypothesis (`mstar.transcription.partial`)."""

    chunk_seconds: Number = 0.0
    unfixed_chunks: Count = 0
    unfixed_tokens: Count = 0
    partials: bool = False

    def values(self) -> dict[str, Any]:
        names = ("chunk_seconds", "unfixed_chunks", "unfixed_tokens", "partials")
        return present(self, {name: name for name in names})


def _noise_values(model: ClientModel, name: str) -> dict[str, Any]:
    """The noise reduction the client set under `name` (a `NoiseReductionUpdate`, or None: off)."""
    if name not in model.model_fields_set:
        return {}
    field: NoiseReductionField | None = getattr(model, name)
    return {"noise_reduction": field and field.update()}


def _include_values(include: list[str] | None, fields_set: set[str]) -> dict[str, Any]:
    """`include` names the extra events and fields a client wants; it replaces the list."""
    if "include" not in fields_set:
        return {}
    return {"partials": PARTIAL_EVENT in (include or [])}


# -- transcription sessions ----------------------------------------------------------


class TranscriptionAudioInput(ClientModel):
    format: TranscriptionFormat = GA_RATE
    transcription: TranscriptionModel | None = None
    turn_detection: TurnDetectionModel | None = None
    noise_reduction: NoiseReductionField | None = None

    def values(self) -> dict[str, Any]:
        values = present(self, {"format": "input_rate"})
        if "transcription" in self.model_fields_set:
            values.update(_transcription_values(self.transcription))
        if "turn_detection" in self.model_fields_set:
            values["turn_detection"] = self.turn_detection.vad() if self.turn_detection else None
        return values | _noise_values(self, "noise_reduction")


class TranscriptionAudio(ClientModel):
    input: TranscriptionAudioInput | None = None


class TranscriptionSession(ClientModel):
    """GA `session.update` with `session.type: "transcription"`."""

    type: TranscriptionKind = "transcription"
    audio: TranscriptionAudio | None = None
    include: list[str] | None = None
    mstar: Mstar | None = None

    def values(self) -> dict[str, Any]:
        values = self.audio.input.values() if self.audio and self.audio.input else {}
        values |= _include_values(self.include, self.model_fields_set)
        return values | (self.mstar.values() if self.mstar else {})


class BetaTranscriptionSession(ClientModel):
    """Beta `transcription_session.update`."""

    input_audio_format: TranscriptionFormat = TRANSCRIPTION_PCM16_RATE
    input_audio_transcription: TranscriptionModel | None = None
    input_audio_noise_reduction: NoiseReductionField | None = None
    turn_detection: BetaTurnDetectionModel | None = None
    include: list[str] | None = None
    mstar: Mstar | None = None

    def values(self) -> dict[str, Any]:
        values = present(self, {"input_audio_format": "input_rate"})
        if "input_audio_transcription" in self.model_fields_set:
            values.update(_transcription_values(self.input_audio_transcription))
        if "turn_detection" in self.model_fields_set:
            values["turn_detection"] = self.turn_detection.vad() if self.turn_detection else None
        values |= _noise_values(self, "input_audio_noise_reduction")
        values |= _include_values(self.include, self.model_fields_set)
        return values | (self.mstar.values() if self.mstar else {})


# -- agent sessions --------------------------------------------------------------------


def _formats(values: dict[str, Any]) -> dict[str, Any]:
    """An audio format's rate and encoding as the two settings they are."""
    for side in ("input", "output"):
        if f"{side}_rate" in values:
            audio_format: AudioFormat = values[f"{side}_rate"]
            values[f"{side}_rate"], values[f"{side}_codec"] = audio_format
    return values


class AgentAudioInput(ClientModel):
    format: AgentFormat = AudioFormat(GA_RATE)
    transcription: TranscriptionModel | None = None
    turn_detection: TurnDetectionModel | None = None
    noise_reduction: NoiseReductionField | None = None

    def values(self) -> dict[str, Any]:
        values = _formats(present(self, {"format": "input_rate"}))
        if "transcription" in self.model_fields_set:
            values["input_transcription"] = self.transcription and self.transcription.input_transcription()
        if "turn_detection" in self.model_fields_set:
            values["turn_detection"] = self.turn_detection and self.turn_detection.turn_detection()
        return values | _noise_values(self, "noise_reduction")


class AgentAudioOutput(ClientModel):
    format: AgentFormat = AudioFormat(GA_RATE)
    voice: Voice | None = None
    speed: Speed | None = None

    def values(self) -> dict[str, Any]:
        values = present(self, {"format": "output_rate", "voice": "voice", "speed": "speed"})
        return _formats(_null_is_default(values))


class AgentAudio(ClientModel):
    input: AgentAudioInput | None = None
    output: AgentAudioOutput | None = None


class AgentSession(ClientModel):
    """GA `session.update` with `session.type: "realtime"`."""

    type: RealtimeKind = "realtime"
    model: Model | None = None
    instructions: Instructions | None = None
    output_modalities: Modalities | None = None
    audio: AgentAudio | None = None
    tools: Tools | None = None
    tool_choice: GAToolChoice | None = None
    max_output_tokens: MaxTokens = None

    def values(self) -> dict[str, Any]:
        values = _agent_values(self, "output_modalities", "max_output_tokens")
        if self.audio is not None:
            values |= self.audio.input.values() if self.audio.input else {}
            values |= self.audio.output.values() if self.audio.output else {}
        return values


class BetaAgentSession(ClientModel):
    """Beta `session.update`: the same settings, flat."""

    model: Model | None = None
    instructions: Instructions | None = None
    modalities: Modalities | None = None
    voice: Voice | None = None
    speed: Speed | None = None
    input_audio_format: AgentFormat = AudioFormat(AGENT_PCM16_RATE)
    output_audio_format: AgentFormat = AudioFormat(AGENT_PCM16_RATE)
    input_audio_transcription: TranscriptionModel | None = None
    input_audio_noise_reduction: NoiseReductionField | None = None
    turn_detection: BetaTurnDetectionModel | None = None
    tools: Tools | None = None
    tool_choice: BetaToolChoice | None = None
    max_response_output_tokens: MaxTokens = None

    def values(self) -> dict[str, Any]:
        values = _agent_values(self, "modalities", "max_response_output_tokens")
        values |= _null_is_default(
            present(
                self,
                {
                    "voice": "voice",
                    "speed": "speed",
                    "input_audio_format": "input_rate",
                    "output_audio_format": "output_rate",
                },
            )
        )
        values = _formats(values)
        if "input_audio_transcription" in self.model_fields_set:
            transcription = self.input_audio_transcription
            values["input_transcription"] = transcription and transcription.input_transcription()
        if "turn_detection" in self.model_fields_set:
            values["turn_detection"] = self.turn_detection and self.turn_detection.turn_detection()
        return values | _noise_values(self, "input_audio_noise_reduction")


def _agent_values(
    session: AgentSession | BetaAgentSession, modalities_field: str, tokens_field: str
) -> dict[str, Any]:
    """The settings both generations name alike, and the two they name apart."""
    values = present(
        session,
        {
            "model": "model",
            "instructions": "instructions",
            modalities_field: "output_modalities",
            tokens_field: "max_output_tokens",
            "tools": "tools",
            "tool_choice": "tool_choice",
        },
    )
    if values.get("output_modalities") is not None:
        values["output_modalities"] = modalities(values["output_modalities"])
    if values.get("tools") is not None:
        values["tools"] = tuple(tool.tool() for tool in values["tools"])
    if values.get("tool_choice") is not None:
        values["tool_choice"] = tool_choice(values["tool_choice"])
    return _null_is_default(values)


_DEFAULTS = AgentConfig()


def _null_is_default(values: dict[str, Any]) -> dict[str, Any]:
    """The SDK's types let these be null; null sets the default (a voice or a model of None is
    the server's own)."""
    for key in ("instructions", "output_modalities", "tools", "tool_choice", "speed"):
        if key in values and values[key] is None:
            values[key] = getattr(_DEFAULTS, key)
    return values
