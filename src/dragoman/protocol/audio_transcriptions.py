"""OpenAI's `POST /v1/audio/transcriptions`: the form fields, and each response format.

The request is multipart (`file`, `model`, `language`, `prompt`, `response_format`,
`temperature`, `timestamp_granularities[]`, `stream`); the response is one of

- `json`: `{"text", "usage": {"type": "duration", "seconds"}}` (`Transcription`),
- `verbose_json`: `{"task", "language", "duration", "text", "segments"?, "words"?, "usage"}`
  (`TranscriptionVerbose`), with `segments` unless `timestamp_granularities` leaves them out,
- `text`, `srt`, `vtt`: plain text,
- `stream=true`: server-sent events, `transcript.text.delta` then one `transcript.text.done`.

Errors are OpenAI's `{"error": {"message", "type", "param", "code"}}`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dragoman.errors import ClientError, DragomanError, InvalidValue, ServerError
from dragoman.sessions.file_transcription import FileRequest, FileTranscript, Segment

ResponseFormat = Literal["json", "text", "srt", "vtt", "verbose_json"]
Granularity = Literal["segment", "word"]
#: Longest prompt and language code taken (the engine keeps the prompt's last 223 tokens).
MAX_PROMPT_CHARS = 4096
MAX_LANGUAGE_CHARS = 16
#: Whisper's text tokens per second of audio is far below this: the encoder's positions
#: (1500 for 30 s) are what `usage.input_token_details.audio_tokens` counts.
AUDIO_TOKENS_PER_SECOND = 50


class TranscriptionParams(BaseModel):
    """The form fields besides `file`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str = Field(min_length=1, max_length=256)
    language: str | None = Field(default=None, max_length=MAX_LANGUAGE_CHARS)
    prompt: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    response_format: ResponseFormat = "json"
    temperature: float = Field(default=0.0, ge=0.0, le=1.0)
    timestamp_granularities: tuple[Granularity, ...] = ()
    stream: bool = False

    @classmethod
    def from_form(cls, fields: Mapping[str, Sequence[str]]) -> TranscriptionParams:
        """Validate the form's text fields (each a list of its values); `ClientError` if bad."""
        values: dict[str, Any] = {}
        for name in ("model", "language", "prompt", "response_format", "temperature", "stream"):
            given = fields.get(name)
            if given:
                values[name] = given[-1]
        granularities = [
            *fields.get("timestamp_granularities[]", ()),
            *fields.get("timestamp_granularities", ()),
        ]
        if granularities:
            values["timestamp_granularities"] = tuple(dict.fromkeys(granularities))
        if "model" not in values:
            raise InvalidValue("you must provide a model parameter", param="model")
        for name in ("language", "prompt"):
            if name in values and not str(values[name]).strip():
                del values[name]
        try:
            params = cls.model_validate(values)
        except ValidationError as exc:
            error = exc.errors()[0]
            field_name = str(error["loc"][0]) if error["loc"] else None
            raise InvalidValue(_explain(field_name, error), param=field_name) from None
        if params.timestamp_granularities and params.response_format != "verbose_json":
            raise InvalidValue(
                "timestamp_granularities is only supported with response_format 'verbose_json'.",
                param="timestamp_granularities",
            )
        if params.stream and params.response_format not in ("json", "text"):
            raise InvalidValue(
                f"response_format '{params.response_format}' is not supported with stream=true; "
                "use 'json' or 'text'.",
                param="response_format",
            )
        return params

    @property
    def wants_segments(self) -> bool:
        return not self.timestamp_granularities or "segment" in self.timestamp_granularities

    def file_request(self) -> FileRequest:
        """What the transcription is asked for. Word starts are asked of the engine for `words`,
        and for the formats whose segments are timed (srt, vtt, verbose_json), which are cut
        into sentences with them; `json` and `text` skip the alignment pass."""
        words = "word" in self.timestamp_granularities
        timed = self.response_format in ("srt", "vtt") or (
            self.response_format == "verbose_json" and self.wants_segments
        )
        return FileRequest(self.language, self.prompt, word_times=words or timed, words=words)


def _explain(name: str | None, error: Mapping[str, Any]) -> str:
    if name == "response_format":
        options = ", ".join(get_args(ResponseFormat))
        return f"Invalid response_format; it must be one of: {options}."
    if name == "timestamp_granularities":
        return "Invalid timestamp_granularities; each must be 'segment' or 'word'."
    if name == "temperature":
        return "Invalid temperature; it must be a number between 0 and 1."
    return f"Invalid {name}: {error.get('msg', 'bad value')}."


def _usage(duration: float) -> dict[str, Any]:
    return {"type": "duration", "seconds": round(duration, 3)}


def json_body(result: FileTranscript) -> dict[str, Any]:
    return {"text": result.text, "usage": _usage(result.duration)}


def verbose_body(result: FileTranscript, params: TranscriptionParams) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": "transcribe",
        "language": result.language,
        "duration": round(result.duration, 3),
        "text": result.text,
    }
    if params.wants_segments:
        body["segments"] = [
            {
                "id": s.id,
                "seek": s.seek,
                "start": round(s.start, 3),
                "end": round(s.end, 3),
                "text": s.text,
                "tokens": s.tokens,
                "temperature": s.temperature,
                "avg_logprob": s.avg_logprob,
                "compression_ratio": s.compression_ratio,
                "no_speech_prob": s.no_speech_prob,
            }
            for s in result.segments
        ]
    if "word" in params.timestamp_granularities and result.words is not None:
        body["words"] = [
            {"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3)} for w in result.words
        ]
    body["usage"] = _usage(result.duration)
    return body


def _clock(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def _cues(segments: Iterable[Segment]) -> list[Segment]:
    return [s for s in segments if s.text.strip()]


def srt(segments: Iterable[Segment]) -> str:
    """SubRip: numbered cues, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, a blank line after each."""
    return "".join(
        f"{n}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text.strip()}\n\n"
        for n, s in enumerate(_cues(segments), start=1)
    )


def vtt(segments: Iterable[Segment]) -> str:
    """WebVTT: the `WEBVTT` header, then cues `HH:MM:SS.mmm --> HH:MM:SS.mmm`."""
    cues = "".join(
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text.strip()}\n\n" for s in _cues(segments)
    )
    return "WEBVTT\n\n" + cues


def text_body(result: FileTranscript) -> str:
    return result.text + "\n"


def delta_event(delta: str) -> dict[str, Any]:
    return {"type": "transcript.text.delta", "delta": delta}


def done_event(result: FileTranscript) -> dict[str, Any]:
    """`transcript.text.done`; its usage is in tokens (OpenAI's streaming models bill tokens):
    the audio as the encoder's positions, the prompt's and the transcript's text tokens."""
    audio_tokens = round(result.duration * AUDIO_TOKENS_PER_SECOND)
    input_tokens = audio_tokens + result.prompt_tokens
    return {
        "type": "transcript.text.done",
        "text": result.text,
        "usage": {
            "type": "tokens",
            "input_tokens": input_tokens,
            "input_token_details": {"audio_tokens": audio_tokens, "text_tokens": result.prompt_tokens},
            "output_tokens": result.output_tokens,
            "total_tokens": input_tokens + result.output_tokens,
        },
    }


def error_body(error: DragomanError) -> dict[str, Any]:
    """OpenAI's error object: a client fault quoted, a server fault only by its error id."""
    if isinstance(error, ServerError):
        return {
            "error": {
                "message": error.public_message,
                "type": "server_error",
                "param": None,
                "code": error.code,
            }
        }
    return {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}


def status_of(error: DragomanError) -> int:
    return error.status if isinstance(error, ClientError) else 500
