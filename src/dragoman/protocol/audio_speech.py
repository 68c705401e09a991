"""OpenAI's `POST /v1/audio/speech` request (`openai.types.audio.SpeechCreateParams`) and its
server-sent events (`stream_format: "sse"`).

    {"model": "tts-1", "input": "Hello.", "voice": "alloy" | {"id": "..."},
     "response_format": "mp3", "speed": 1.0, "instructions": "...", "stream_format": "audio"}

`input` is at most 4096 characters. `instructions` steer OpenAI's newer models' delivery; the
voices here have no such control, so it is accepted and ignored. `speed` is OpenAI's 0.25 to
4.0, of which the voices here take 0.25 to 1.5 (past that a clear error). Every model name is
taken: the voice picks the backend (`engines/tts/voices.py`), as the OpenAI-compatible servers
(Kokoro-FastAPI, speaches) do. SSE events: `speech.audio.delta` `{"audio": base64}`, each a
piece of the file in `response_format`, then `speech.audio.done` with the usage.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dragoman.audio.encoding import Format
from dragoman.engines.tts.base import MAX_SPEED, MIN_SPEED
from dragoman.errors import InvalidValue

#: OpenAI's limit on `input`.
MAX_INPUT_CHARS = 4096
#: OpenAI's range for `speed` (the request's); the voices' own range is narrower.
OPENAI_MAX_SPEED = 4.0
#: The rate of OpenAI's `pcm`: 24 kHz, 16-bit, mono. Every format here is at it.
RATE = 24_000


class VoiceID(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str


class SpeechParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    input: str = Field(max_length=MAX_INPUT_CHARS)
    voice: str | VoiceID
    response_format: Format = "mp3"
    speed: float = Field(default=1.0, ge=MIN_SPEED, le=OPENAI_MAX_SPEED)
    instructions: str | None = None
    stream_format: Literal["audio", "sse"] = "audio"

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceID) else self.voice


def parse(body: Any) -> SpeechParams:
    """The request, or InvalidValue naming the first bad field as OpenAI would."""
    if not isinstance(body, dict):
        raise InvalidValue("The request body must be a JSON object.")
    try:
        params = SpeechParams.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"] if not isinstance(part, int)) or None
        raise InvalidValue(f"Invalid value for '{param}': {first['msg']}.", param=param) from None
    if not params.input.strip():
        raise InvalidValue("'input' must hold some text to speak.", param="input")
    if params.speed > MAX_SPEED:
        raise InvalidValue(
            f"'speed' {params.speed} is faster than the voices here speak: {MIN_SPEED} to {MAX_SPEED}.",
            param="speed",
        )
    return params


def delta_event(audio: bytes) -> dict[str, Any]:
    return {"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode("ascii")}


def done_event(input_chars: int) -> dict[str, Any]:
    """The usage, in OpenAI's fields: the voices here count no tokens, so `input_tokens` is
    the input's characters (what OpenAI's tts-1 is billed by) and `output_tokens` 0."""
    usage = {"input_tokens": input_chars, "output_tokens": 0, "total_tokens": input_chars}
    return {"type": "speech.audio.done", "usage": usage}
