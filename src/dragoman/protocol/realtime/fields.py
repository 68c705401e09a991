"""Values shared by the Realtime client event models, and how their faults read on the wire.

Client events are parsed strictly (a string is not a string list, a bool is not a
number), with two leniencies the transcription protocol always had: numeric
strings count as numbers, and unknown fields are ignored, so that a client of a
newer SDK still works. A fault becomes `InvalidValue` whose `param` is the
field's path in the event (`session.audio.input.format`,
`session.tools[0].name`), as OpenAI's `error.param` names it.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import PydanticCustomError

from dragoman.audio.g711 import G711_RATE
from dragoman.audio.rates import SUPPORTED_RATES
from dragoman.errors import InvalidValue
from dragoman.protocol.realtime.generation import AGENT_PCM16_RATE, GA_RATE, TRANSCRIPTION_PCM16_RATE
from dragoman.sessions.agent.config import Codec

MAX_EVENT_ID_CHARS = 128
#: Item, call and response ids a client names.
MAX_ID_CHARS = 128

#: The error type of a fault whose message is written here, for the client.
CUSTOM = "dragoman_invalid"


class ClientModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


def fault(message: str, field: str | None = None) -> PydanticCustomError:
    """A validation fault with our own message; `field` names the sub-field at fault, if any."""
    # The message goes in the context: a template would read its braces as placeholders.
    return PydanticCustomError(CUSTOM, "{message}", {"message": message, "field": field})


def _number(value: Any, info: ValidationInfo) -> float:
    """A finite number; numeric strings count as numbers, bools do not."""
    name = info.field_name
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise fault(f"{name} must be a number.") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise fault(f"{name} must be a finite number.")
    return float(value)


def _count(value: Any, info: ValidationInfo) -> int:
    """A non-negative integer; "3" and 3.0 count, 2.5, -1 and true do not."""
    number = _number(value, info)
    if number < 0 or not number.is_integer():
        raise fault(f"{info.field_name} must be a non-negative integer.")
    return int(number)


Number = Annotated[float, BeforeValidator(_number)]
Count = Annotated[int, BeforeValidator(_count)]
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]


def _rate_of(value: Any, pcm16_rate: int) -> int:
    """`"pcm16"` (beta) or `{"type": "audio/pcm", "rate": N}` (GA): the rate it means."""
    if value == "pcm16":
        return pcm16_rate
    if isinstance(value, dict) and value.get("type") == "audio/pcm":
        rate = value.get("rate", GA_RATE)
        if isinstance(rate, int) and not isinstance(rate, bool) and rate in SUPPORTED_RATES:
            return rate
        raise fault(
            f"Unsupported audio/pcm rate {str(rate)[:20]!r}; supported rates: "
            f"{', '.join(map(str, SUPPORTED_RATES))}."
        )
    raise fault(
        f'Unsupported audio format; use "pcm16" ({pcm16_rate // 1000} kHz) '
        f'or {{"type": "audio/pcm", "rate": {GA_RATE}}}.'
    )


def _transcription_rate(value: Any) -> int:
    return _rate_of(value, TRANSCRIPTION_PCM16_RATE)


class AudioFormat(NamedTuple):
    """An agent session's audio format: its rate and encoding."""

    rate: int
    codec: Codec = "pcm16"


#: G.711 at 8 kHz, by GA's format type and by beta's name.
_G711: dict[str, Codec] = {
    "audio/pcmu": "pcmu",
    "audio/pcma": "pcma",
    "g711_ulaw": "pcmu",
    "g711_alaw": "pcma",
}


def _agent_format(value: Any) -> AudioFormat:
    """PCM16 (beta "pcm16", GA audio/pcm) or G.711 (GA audio/pcmu and audio/pcma, beta
    g711_ulaw and g711_alaw), which telephony clients send."""
    name = value.get("type") if isinstance(value, dict) else value
    if isinstance(name, str) and name in _G711:
        return AudioFormat(G711_RATE, _G711[name])
    try:
        return AudioFormat(_rate_of(value, AGENT_PCM16_RATE))
    except PydanticCustomError:
        raise fault(
            f'Unsupported audio format; use "pcm16", "g711_ulaw" or "g711_alaw" (beta), or '
            f'{{"type": "audio/pcm", "rate": {GA_RATE}}}, {{"type": "audio/pcmu"}} or '
            '{"type": "audio/pcma"}.'
        ) from None


#: An audio format, validated to the sample rate it names; "pcm16" means 16 kHz here...
TranscriptionFormat = Annotated[int, BeforeValidator(_transcription_rate)]
#: ... and 24 kHz in an agent session, as OpenAI's beta means it; an agent takes G.711 too.
AgentFormat = Annotated[AudioFormat, BeforeValidator(_agent_format)]


def _unit_interval(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise fault("threshold must be between 0 and 1.")
    return value


UnitInterval = Annotated[float, BeforeValidator(_number), AfterValidator(_unit_interval)]

_FIELD = re.compile(r"[a-z_][a-z0-9_]*\Z")


def param_of(loc: tuple[int | str, ...], ctx: dict[str, Any] | None = None) -> str:
    """A pydantic error location as the field path OpenAI's `param` names.

    Union members are tagged with CamelCase names (`Tag("Function")`) that pydantic
    puts in the location; wire fields are snake_case, so anything else is a tag.
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _FIELD.match(part):
            path += f".{part}"
    if ctx and ctx.get("field"):
        path += f".{ctx['field']}"
    return path.lstrip(".")


_OBJECT_ERRORS = frozenset({"model_type", "model_attributes_type", "dict_type"})


def invalid(exc: ValidationError) -> InvalidValue:
    """The client's fault in `exc` (its first error), worded as OpenAI words its own."""
    first = exc.errors(include_url=False, include_input=False)[0]
    param = param_of(first["loc"], first.get("ctx"))
    if first["type"] == CUSTOM:
        message = first["msg"]
    elif first["type"] == "missing":
        message = f"Missing required parameter: '{param}'."
    elif first["type"] in _OBJECT_ERRORS:
        message = f"Invalid type for '{param}': expected an object."
    else:
        message = f"Invalid value for '{param}': {first['msg'].rstrip('.')}."
    return InvalidValue(message, param=param or None)
