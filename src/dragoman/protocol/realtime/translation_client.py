"""Client events of OpenAI's Realtime translation session, as pydantic models, and their parser.

The shapes are `openai.types.realtime.realtime_translation_*` (SDK 3.60):

- `session.update` `{"session": {"audio": {"input": {"transcription": {"model"} | null,
  "noise_reduction": {"type": "near_field" | "far_field", "strength"} | null},
  "output": {"language"}}}}`; "The session type and model are set at creation and cannot
  be changed with session.update";
- `session.input_audio_buffer.append` `{"audio"}`: "base64-encoded 24 kHz PCM16 mono
  little-endian raw audio bytes. Unsupported websocket audio formats return a validation
  error"; a session takes no other format, so an update naming another is refused too;
- `session.close`.

A bad frame becomes the session's `Rejected` with the error to send (`client_parsers.py`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from dragoman.errors import InvalidValue
from dragoman.protocol.realtime.client_events import ClientEvent as EventModel
from dragoman.protocol.realtime.client_parsers import _parse, _unknown, _validate
from dragoman.protocol.realtime.fields import ClientModel, fault
from dragoman.protocol.realtime.generation import GA_RATE, Generation
from dragoman.protocol.realtime.session_fields import NoiseReductionField
from dragoman.sessions.translation import events as translation

#: OpenAI's model name, and this server's own; an ephemeral key's session may carry either.
OPENAI_MODEL = "gpt-realtime-translate"
OWN_MODEL = "dragoman-interpreter"
MODEL_NAMES = frozenset({OPENAI_MODEL, OWN_MODEL})
#: How long after its start a session's `expires_at` lies (OpenAI's Realtime sessions: 60 minutes).
SESSION_SECONDS = 3600
#: The one input format: OpenAI's "24 kHz PCM16 mono".
INPUT_RATE = GA_RATE
FORMAT_PARAM = "session.audio.input.format"
MAX_NAME_CHARS = 64


def _pcm24k(value: Any) -> Any:
    if value == {"type": "audio/pcm", "rate": INPUT_RATE} or value == {"type": "audio/pcm"}:
        return value
    raise fault(
        'Translation sessions take 24 kHz PCM16 mono audio only: {"type": "audio/pcm", "rate": 24000}, '
        "sent as base64 in session.input_audio_buffer.append."
    )


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]


class TranscriptionField(ClientModel):
    model: Name


class AudioInputField(ClientModel):
    transcription: TranscriptionField | None = None
    noise_reduction: NoiseReductionField | None = None
    #: Not OpenAI's: a client that names a format must name the one taken.
    format: Annotated[Any, BeforeValidator(_pcm24k)] = None


class AudioOutputField(ClientModel):
    language: Name | None = None


class AudioField(ClientModel):
    input: AudioInputField | None = None
    output: AudioOutputField | None = None


class TranslationSessionFields(ClientModel):
    type: Literal["translation"] | None = None
    model: Name | None = None
    audio: AudioField | None = None

    def values(self) -> dict[str, Any]:
        """The fields the client set, as `TranslationConfig.patched` takes them (plus `model`,
        which the session checks against its own)."""
        out: dict[str, Any] = {}
        if self.model is not None:
            out["model"] = self.model
        audio = self.audio
        if audio is None:
            return out
        if audio.output is not None and audio.output.language is not None:
            out["language"] = audio.output.language
        source = audio.input
        if source is not None:
            if "transcription" in source.model_fields_set:
                out["transcription"] = source.transcription.model if source.transcription else None
            if "noise_reduction" in source.model_fields_set:
                out["noise_reduction"] = source.noise_reduction and source.noise_reduction.update()
        return out


class SessionUpdate(EventModel):
    type: Literal["session.update"]
    session: TranslationSessionFields


class InputAudioBufferAppend(EventModel):
    type: Literal["session.input_audio_buffer.append"]
    #: Base64 24 kHz PCM16 mono (decoded by the session, which carries the odd byte).
    audio: str


class SessionClose(EventModel):
    type: Literal["session.close"]


def known_model(name: str) -> bool:
    """OpenAI's name (or a dated snapshot of it) or this server's."""
    return name in MODEL_NAMES or name.startswith(OPENAI_MODEL + "-")


class TranslationParser:
    """Parses one translation connection's client frames into the session's events."""

    #: The bound start (`transports/websocket/bound.py`) reads it; translation has one generation.
    generation = Generation.GA

    def parse(self, raw: str | bytes) -> translation.ClientEvent:
        """The session event in a frame; a bad one becomes `Rejected` (this never raises ClientError)."""
        return _parse(raw, self._event, translation.Rejected)

    def _event(self, kind: str, event_id: str | None, data: dict[str, Any]) -> translation.ClientEvent:
        if kind == "session.input_audio_buffer.append":
            return translation.AppendAudio(_validate(InputAudioBufferAppend, data).audio, event_id)
        if kind == "session.update":
            return translation.UpdateSession(_validate(SessionUpdate, data).session.values(), event_id)
        if kind == "session.close":
            _validate(SessionClose, data)
            return translation.CloseSession(event_id)
        if kind in ("input_audio_buffer.append", "input_audio_buffer.commit", "response.create"):
            raise InvalidValue(
                f"{kind!r} is a voice-agent event: a translation session takes session.update, "
                "session.input_audio_buffer.append and session.close.",
                code="invalid_event",
                param="type",
            )
        raise _unknown(kind, "translation")


def parse_session_config(session: dict[str, Any]) -> dict[str, Any]:
    """A session object (a client secret's), checked as an update would check it: its values."""
    return _validate(SessionUpdate, {"type": "session.update", "session": session}).session.values()
