"""The values of a Realtime `session` object's fields: their bounds and their checks.

The session models (`protocol.realtime.session_models`) and `response.create`'s
overrides (`protocol.realtime.client_events`) type their fields with these; each check
raises a `fault` whose message the client reads (`protocol.realtime.fields`). A count
or a duration out of its range, a function name OpenAI would refuse, or a
`session.type` this endpoint does not serve, is an error, and the update changes
nothing. `present` reads back what a model's client set; `tool_choice` and `modalities`
turn those two fields into the agent's settings.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, ValidationInfo

from dragoman.protocol.realtime.fields import ClientModel, Count, Number, fault
from dragoman.sessions.agent.config import ForcedFunction, FunctionTool, Modality, ToolChoice
from dragoman.sessions.speech.config import NoiseReductionType, NoiseReductionUpdate
from dragoman.streaming.turn_config import MAX_IDLE_TIMEOUT_MS, MIN_IDLE_TIMEOUT_MS
from dragoman.streaming.turns import Eagerness

MAX_LANGUAGE_CHARS = 32
MAX_PROMPT_CHARS = 4_000
MAX_MODEL_CHARS = 200
MAX_INSTRUCTIONS_CHARS = 32_000
MAX_VOICE_CHARS = 64
#: OpenAI's function names (`FunctionDefinition.name`): "Must be a-z, A-Z, 0-9, or contain
#: underscores and dashes, with a maximum length of 64."
FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
MAX_DESCRIPTION_CHARS = 4_000
MAX_TOOLS = 128
#: GA `max_output_tokens`: "Provide an integer between 1 and 4096 to limit output tokens, or `inf`".
MAX_OUTPUT_TOKENS = 4096
#: The most `prefix_padding_ms` and `silence_duration_ms` may be. OpenAI documents no range
#: (its SDK's types say only "in milliseconds", defaults 300 and 500); 10 s is far past any
#: turn-taking use, and bounds the padding a segmenter holds (160 000 samples) and the
#: silence a turn may wait through.
MAX_VAD_MS = 10_000

Model = Annotated[str, Field(max_length=MAX_MODEL_CHARS)]
Instructions = Annotated[str, Field(max_length=MAX_INSTRUCTIONS_CHARS)]
Voice = Annotated[str, Field(min_length=1, max_length=MAX_VOICE_CHARS)]


def _function_name(value: str) -> str:
    if not FUNCTION_NAME.match(value):
        raise fault("A function's name is 1 to 64 letters, digits, '_' or '-'.")
    return value


FunctionName = Annotated[str, AfterValidator(_function_name)]
Modalities = Annotated[list[Literal["text", "audio"]], Field(min_length=1, max_length=2)]


def _speed(value: float) -> float:
    if not 0.25 <= value <= 1.5:
        raise fault("speed must be between 0.25 and 1.5.")
    return value


Speed = Annotated[Number, AfterValidator(_speed)]


def _vad_ms(value: int, info: ValidationInfo) -> int:
    if value > MAX_VAD_MS:
        raise fault(f"{info.field_name} must be an integer between 0 and {MAX_VAD_MS}.")
    return value


VadMs = Annotated[Count, AfterValidator(_vad_ms)]


def _idle_ms(value: int, info: ValidationInfo) -> int:
    if not MIN_IDLE_TIMEOUT_MS <= value <= MAX_IDLE_TIMEOUT_MS:
        raise fault(
            f"{info.field_name} must be an integer between {MIN_IDLE_TIMEOUT_MS} and {MAX_IDLE_TIMEOUT_MS}, or null."
        )
    return value


IdleMs = Annotated[Count, AfterValidator(_idle_ms)]


def _max_tokens(value: Any, info: ValidationInfo) -> int | None:
    """An integer in [1, 4096], or "inf" (None, as null is)."""
    if value == "inf" or value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_OUTPUT_TOKENS:
        return value
    raise fault(f'{info.field_name} must be an integer between 1 and {MAX_OUTPUT_TOKENS}, or "inf".')


MaxTokens = Annotated[int | None, BeforeValidator(_max_tokens)]


def _kind(value: Any, expected: str, endpoint: str) -> str:
    """`session.type`, which must be the kind this endpoint serves."""
    if value != expected:
        raise fault(
            f"This endpoint serves {endpoint} sessions; session.type {str(value)[:40]!r} is not supported here."
        )
    return expected


TranscriptionKind = Annotated[
    str, BeforeValidator(lambda value: _kind(value, "transcription", "transcription"))
]
RealtimeKind = Annotated[str, BeforeValidator(lambda value: _kind(value, "realtime", "realtime (agent)"))]


def _turn_type(value: Any) -> str:
    if value not in ("server_vad", "semantic_vad"):
        raise fault(
            f"turn_detection type {str(value)[:40]!r} is not supported; "
            "use 'server_vad', 'semantic_vad' or null."
        )
    return str(value)


TurnType = Annotated[str, BeforeValidator(_turn_type)]


def _eagerness(value: Any) -> Eagerness:
    if value not in ("low", "medium", "high", "auto"):
        raise fault(f"eagerness {str(value)[:40]!r} is not supported; use 'low', 'medium', 'high' or 'auto'.")
    return value  # type: ignore[no-any-return]


TurnEagerness = Annotated[Eagerness, BeforeValidator(_eagerness)]


def _strength(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise fault("strength must be between 0 and 1.")
    return value


class NoiseReductionField(ClientModel):
    """`audio.input.noise_reduction` (GA, translation) and beta's `input_audio_noise_reduction`
    (whose type has no `strength`): `{"type": "near_field" | "far_field", "strength"}`."""

    type: NoiseReductionType
    strength: Annotated[Number, AfterValidator(_strength)] | None = None

    def update(self) -> NoiseReductionUpdate:
        return NoiseReductionUpdate(self.type, self.strength)


class FunctionToolModel(ClientModel):
    type: Literal["function"] = "function"
    name: FunctionName
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION_CHARS)] = ""
    parameters: dict[str, Any] = Field(default_factory=dict)

    def tool(self) -> FunctionTool:
        return FunctionTool(self.name, self.description, self.parameters)


Tools = Annotated[list[FunctionToolModel], Field(max_length=MAX_TOOLS)]


class ToolChoiceFunction(ClientModel):
    type: Literal["function"]
    name: FunctionName


def _tool_choice_kind(value: Any) -> str:
    return "Mode" if isinstance(value, str) else "Function"


#: GA: "Provide one of the string modes or force a specific function".
GAToolChoice = Annotated[
    Annotated[Literal["auto", "none", "required"], Tag("Mode")]
    | Annotated[ToolChoiceFunction, Tag("Function")],
    Discriminator(_tool_choice_kind),
]
#: Beta types `tool_choice` as a string: "Options are `auto`, `none`, `required`, or specify a
#: function"; a string that is no mode names the function.
BetaToolChoice = Annotated[
    Annotated[FunctionName, Tag("Mode")] | Annotated[ToolChoiceFunction, Tag("Function")],
    Discriminator(_tool_choice_kind),
]


def tool_choice(value: str | ToolChoiceFunction) -> ToolChoice:
    """A mode, or a function to force; beta's string form names the function."""
    if isinstance(value, ToolChoiceFunction):
        return ForcedFunction(value.name)
    if value in ("auto", "none", "required"):
        return value  # type: ignore[return-value]
    return ForcedFunction(value)


def modalities(value: list[Literal["text", "audio"]]) -> tuple[Modality, ...]:
    """Audio, whose transcript is its text, whenever it is asked for (beta asks ["text", "audio"])."""
    return ("audio",) if "audio" in value else ("text",)


def present(model: ClientModel, names: dict[str, str]) -> dict[str, Any]:
    """The fields of `model` the client set, renamed by `names` (wire name -> config field)."""
    return {key: getattr(model, name) for name, key in names.items() if name in model.model_fields_set}
