"""OpenAI Realtime transcription events, in both generations the SDK speaks.

Beta (`client.beta.realtime`, header `OpenAI-Beta: realtime=v1`) configures with
`transcription_session.update`; GA (`client.realtime`) with `session.update`
carrying `session.type: "transcription"` and the audio settings under
`session.audio.input` (PROTOCOLS.md). Both parse into the session's input events
(`dragoman.sessions.transcription.events`); everything about the wire is checked
here, and what needs the session's state (the item cap, an empty buffer) there.

Validation follows the seed: "the unfixed counts are non-negative integers;
numeric strings count as numbers. language and prompt are strings (or null),
language at most MAX_LANGUAGE_CHARS characters. Any other value is an error and
the update changes nothing."
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Any

from dragoman.errors import ClientError, InvalidEvent, InvalidValue
from dragoman.sessions.transcription.events import (
    AppendAudio,
    ClearBuffer,
    ClientEvent,
    CommitBuffer,
    Rejected,
    UpdateSession,
)
from dragoman.streaming.turns import ServerVADConfig

MAX_LANGUAGE_CHARS = 32
MAX_PROMPT_CHARS = 4_000
MAX_EVENT_ID_CHARS = 128
SUPPORTED_RATES = (8_000, 16_000, 24_000, 44_100, 48_000)


class Generation(StrEnum):
    BETA = "beta"
    GA = "ga"


def generation_of(openai_beta_header: str) -> Generation:
    """`client.beta.realtime.connect` sends `OpenAI-Beta: realtime=v1` (PROTOCOLS.md)."""
    return Generation.BETA if "realtime=v1" in openai_beta_header else Generation.GA


def default_input_rate(generation: Generation) -> int:
    """OpenAI's GA audio/pcm is 24 kHz only; the beta default is pcm16 at 16 kHz (the seed)."""
    return 24_000 if generation is Generation.GA else 16_000


class ClientParser:
    """Parses one connection's client events, and follows the generation the client speaks.

    The generation only shapes `*.created` / `*.updated` (`protocol.realtime.server_events`), and
    every `updated` answers an update, which sets the generation by its own type;
    so it is taken from each update that parses, even one the session then refuses.
    """

    def __init__(self, generation: Generation) -> None:
        self.generation = generation

    def parse(self, raw: str | bytes) -> ClientEvent:
        """The session event in a frame; a bad one becomes `Rejected` (this never raises ClientError)."""
        if not isinstance(raw, str):
            return Rejected(InvalidEvent("Events must be JSON text frames, not binary."))
        try:
            kind, event_id, body = _envelope(raw)
        except ClientError as exc:
            return Rejected(exc)
        try:
            return self._event(kind, event_id, body)
        except ClientError as exc:
            return Rejected(exc, event_id)

    def _event(self, kind: str, event_id: str | None, body: dict[str, Any]) -> ClientEvent:
        if kind in ("transcription_session.update", "session.update"):
            generation = Generation.GA if kind == "session.update" else Generation.BETA
            event = UpdateSession(_session_values(generation, body.get("session")), event_id)
            self.generation = generation
            return event
        if kind == "input_audio_buffer.append":
            audio = body.get("audio")
            if not isinstance(audio, str):
                raise InvalidValue("input_audio_buffer.append needs 'audio', a base64 string.", param="audio")
            return AppendAudio(audio, event_id)
        if kind == "input_audio_buffer.commit":
            return CommitBuffer(event_id)
        if kind == "input_audio_buffer.clear":
            return ClearBuffer(event_id)
        raise InvalidEvent(
            f"Unknown or unsupported event type {kind!r} for a transcription session.", param="type"
        )


def _envelope(raw: str) -> tuple[str, str | None, dict[str, Any]]:
    """The event's type, its event_id and the whole object; errors here quote no event_id."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise InvalidEvent("The event is not valid JSON.") from None
    if not isinstance(data, dict):
        raise InvalidEvent("An event must be a JSON object.")
    event_id = data.get("event_id")
    if event_id is not None and (not isinstance(event_id, str) or len(event_id) > MAX_EVENT_ID_CHARS):
        raise InvalidValue("event_id must be a string.", param="event_id")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise InvalidEvent("The event has no string 'type'.", param="type")
    return kind, event_id, data


def _session_values(generation: Generation, session: Any) -> dict[str, Any]:
    """The fields an update sets, keyed by `SessionConfig` field; absent fields are left out."""
    if not isinstance(session, dict):
        raise InvalidValue("'session' must be an object.", param="session")
    values: dict[str, Any] = {}
    if generation is Generation.GA:
        kind = session.get("type", "transcription")
        if kind != "transcription":
            raise InvalidValue(
                f"This endpoint serves transcription sessions; session.type {kind!r} is not supported here.",
                param="session.type",
            )
        audio = _object(session, "audio", "session")
        audio_in = _object(audio, "input", "session.audio") if audio is not None else None
        if audio_in is not None:
            if "format" in audio_in:
                values["input_rate"] = _input_rate(audio_in["format"], "session.audio.input.format")
            if "transcription" in audio_in:
                values.update(_transcription(audio_in["transcription"], "session.audio.input.transcription"))
            if "turn_detection" in audio_in:
                values["turn_detection"] = _turn_detection(
                    audio_in["turn_detection"], "session.audio.input.turn_detection"
                )
    else:
        if "input_audio_format" in session:
            values["input_rate"] = _input_rate(session["input_audio_format"], "session.input_audio_format")
        if "input_audio_transcription" in session:
            values.update(
                _transcription(session["input_audio_transcription"], "session.input_audio_transcription")
            )
        if "turn_detection" in session:
            values["turn_detection"] = _turn_detection(session["turn_detection"], "session.turn_detection")
    mstar = _object(session, "mstar", "session")
    if mstar is not None:
        if "chunk_seconds" in mstar:
            values["chunk_seconds"] = _number(mstar["chunk_seconds"], "session.mstar.chunk_seconds")
        for key in ("unfixed_chunks", "unfixed_tokens"):
            if key in mstar:
                values[key] = _count(mstar[key], f"session.mstar.{key}")
    return values


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidValue(f"'{where}.{key}' must be an object.", param=f"{where}.{key}")
    return value


def _input_rate(value: Any, param: str) -> int:
    if value == "pcm16":
        return 16_000
    if isinstance(value, dict) and value.get("type") == "audio/pcm":
        rate = value.get("rate", 24_000)
        if isinstance(rate, int) and not isinstance(rate, bool) and rate in SUPPORTED_RATES:
            return rate
        raise InvalidValue(
            f"Unsupported audio/pcm rate {rate!r}; supported rates: {', '.join(map(str, SUPPORTED_RATES))}.",
            param=param,
        )
    raise InvalidValue(
        'Unsupported input audio format; use "pcm16" (16 kHz) or {"type": "audio/pcm", "rate": 24000}.',
        param=param,
    )


def _transcription(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {"model": None, "language": None, "prompt": None}
    if not isinstance(value, dict):
        raise InvalidValue(f"'{param}' must be an object or null.", param=param)
    out: dict[str, Any] = {}
    if "model" in value:
        model = value["model"]
        if model is not None and not isinstance(model, str):
            raise InvalidValue("model must be a string or null.", param=f"{param}.model")
        out["model"] = model
    if "language" in value:
        language = value["language"]
        if language is not None and not isinstance(language, str):
            raise InvalidValue("language must be a string or null.", param=f"{param}.language")
        if language is not None and len(language) > MAX_LANGUAGE_CHARS:
            raise InvalidValue(
                f"language must be at most {MAX_LANGUAGE_CHARS} characters.", param=f"{param}.language"
            )
        out["language"] = language or None
    if "prompt" in value:
        prompt = value["prompt"]
        if prompt is not None and not isinstance(prompt, str):
            raise InvalidValue("prompt must be a string or null.", param=f"{param}.prompt")
        if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidValue(
                f"prompt must be at most {MAX_PROMPT_CHARS} characters.", param=f"{param}.prompt"
            )
        out["prompt"] = prompt or None
    return out


def _turn_detection(value: Any, param: str) -> ServerVADConfig | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidValue(f"'{param}' must be an object or null.", param=param)
    kind = value.get("type", "server_vad")
    if kind != "server_vad":
        raise InvalidValue(
            f"turn_detection type {kind!r} is not supported; use 'server_vad' or null.", param=f"{param}.type"
        )
    defaults = ServerVADConfig()
    threshold = defaults.threshold
    if value.get("threshold") is not None:
        threshold = _number(value["threshold"], f"{param}.threshold")
        if not 0.0 <= threshold <= 1.0:
            raise InvalidValue("threshold must be between 0 and 1.", param=f"{param}.threshold")
    padding = defaults.prefix_padding_ms
    if value.get("prefix_padding_ms") is not None:
        padding = _count(value["prefix_padding_ms"], f"{param}.prefix_padding_ms")
    silence = defaults.silence_duration_ms
    if value.get("silence_duration_ms") is not None:
        silence = _count(value["silence_duration_ms"], f"{param}.silence_duration_ms")
    return ServerVADConfig(threshold=threshold, prefix_padding_ms=padding, silence_duration_ms=silence)


def _number(value: Any, param: str) -> float:
    """A finite number; numeric strings count as numbers (the seed)."""
    if isinstance(value, bool):
        raise InvalidValue(f"{param.rsplit('.', 1)[-1]} must be a number.", param=param)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise InvalidValue(f"{param.rsplit('.', 1)[-1]} must be a number.", param=param) from None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidValue(f"{param.rsplit('.', 1)[-1]} must be a finite number.", param=param)
    return float(value)


def _count(value: Any, param: str) -> int:
    """A non-negative integer; "3" and 3.0 count, 2.5, -1 and true do not."""
    number = _number(value, param)
    if number < 0 or not number.is_integer():
        raise InvalidValue(f"{param.rsplit('.', 1)[-1]} must be a non-negative integer.", param=param)
    return int(number)


def format_for(generation: Generation, rate: int) -> Any:
    """The input format as the client's generation writes it."""
    if generation is Generation.BETA and rate == 16_000:
        return "pcm16"
    return {"type": "audio/pcm", "rate": rate}
