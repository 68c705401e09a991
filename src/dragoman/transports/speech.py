"""`POST /v1/audio/speech`: OpenAI's text-to-speech endpoint, with the voices of the agent.

The text is spoken by the server's shared TTS worker (the agent's, or the interpreter's when
it runs alone), in turns after the live sessions' clauses (`Priority.BULK`: a person in a
conversation waits on those), and streamed as it is made: raw audio in `response_format`, or
server-sent events (`stream_format: "sse"`, `protocol/audio_speech.py`). The status and headers
wait for the first audio, so a failure before it (an unknown voice, a hung engine) is an
ordinary HTTP error; one after it ends the stream (audio) or sends an error event (SSE). A
client that goes away cancels the synthesis at the engine's next chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from dragoman.audio.encoding import MEDIA_TYPES, StreamEncoder
from dragoman.engines.tts.speaker import Speaker
from dragoman.engines.workers import CancelToken, Priority, SerialWorker, Streamed
from dragoman.errors import ClientError, DragomanError, InvalidValue, ServerError
from dragoman.logs import get_logger, log_failure
from dragoman.metrics import ERRORS
from dragoman.protocol import audio_speech as wire
from dragoman.protocol.audio_transcriptions import error_body, status_of
from dragoman.protocol.json_frames import BadJSON, load_json
from dragoman.sessions.agent.jobs import SpeakRequest
from dragoman.transports.readiness import Readiness

log = get_logger(__name__)

#: The largest request body read: 4096 characters of input, in any script, and the other fields.
MAX_BODY_BYTES = 64 * 1024
_END = object()


class Voices(Protocol):
    """A service that speaks: its voices and the worker that runs them."""

    speaker: Speaker | None
    tts_worker: SerialWorker[Streamed[SpeakRequest], None] | None


def speech_router(
    voices: Callable[[], Voices | None], readiness: Readiness, timeout_s: float | None
) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/audio/speech")
    async def create_speech(request: Request) -> Response:
        not_ready = readiness.refusal()
        if not_ready is not None:
            body = {
                "error": {
                    "message": not_ready,
                    "type": "server_error",
                    "param": None,
                    "code": "server_not_ready",
                }
            }
            return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})
        service = voices()
        if service is None or service.speaker is None or service.tts_worker is None:
            body = {
                "error": {
                    "message": "Speech is served where the voice agent or the interpreter runs; "
                    "neither is enabled on this server.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "service_unavailable",
                }
            }
            return JSONResponse(body, status_code=404)
        try:
            params = wire.parse(await _body(request))
            _check_voice(service.speaker, params.voice_name)
        except ClientError as exc:
            return _error(exc)
        speech = _Speech(service.speaker, service.tts_worker, params, timeout_s)
        return await speech.respond()

    return router


async def _body(request: Request) -> Any:
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidValue(f"The request body is larger than {MAX_BODY_BYTES} bytes.")
    try:
        return load_json(raw.decode("utf-8", "replace"), "request body")
    except BadJSON as exc:
        raise InvalidValue(str(exc)) from None


def _check_voice(speaker: Speaker, name: str) -> None:
    """An unknown voice is the client's fault, told now, as this request's field."""
    try:
        speaker.voice(name)
    except InvalidValue as exc:
        raise InvalidValue(exc.message, param="voice") from None


def _error(error: DragomanError) -> JSONResponse:
    ERRORS.labels(error.code).inc()
    return JSONResponse(error_body(error), status_code=status_of(error))


def _reported(exc: BaseException) -> DragomanError:
    """What the client is told: its own fault quoted, anything else logged under an error id."""
    if isinstance(exc, ClientError):
        return exc
    error_id = log_failure(log, "speech failed", exc)
    return exc if isinstance(exc, ServerError) else ServerError(str(exc), error_id=error_id)


class _Speech:
    """One request: the synthesis on the worker, its PCM handed over through a queue."""

    def __init__(
        self,
        speaker: Speaker,
        worker: SerialWorker[Streamed[SpeakRequest], None],
        params: wire.SpeechParams,
        timeout_s: float | None,
    ) -> None:
        self.params = params
        self.cancel = CancelToken()
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.encoder = StreamEncoder(params.response_format, wire.RATE)
        self._worker = worker
        self._timeout_s = timeout_s
        self._task: asyncio.Task[None] | None = None

    async def respond(self) -> Response:
        self._task = asyncio.create_task(self._synthesize())
        try:
            first = await self._next_audio()
        except BaseException as exc:
            await self._stop()
            return _error(_reported(exc))
        if self.params.stream_format == "sse":
            return StreamingResponse(self._events(first), media_type="text/event-stream")
        media_type = MEDIA_TYPES[self.params.response_format]
        return StreamingResponse(self._audio(first), media_type=media_type)

    async def _synthesize(self) -> None:
        loop = asyncio.get_running_loop()
        request = SpeakRequest(self.params.input, self.params.voice_name, self.params.speed, wire.RATE)

        def emit(piece: object) -> None:
            loop.call_soon_threadsafe(self.queue.put_nowait, piece)

        try:
            async with self._worker.turn(Priority.BULK) as worker:
                await worker.run(Streamed(request, self.cancel, emit), self.cancel, self._timeout_s)
        except BaseException as exc:
            self.queue.put_nowait(exc)
            raise
        self.queue.put_nowait(_END)

    async def _next_audio(self) -> bytes:
        """The next encoded bytes (b"" at the end of the speech); raises what the synthesis raised."""
        while True:
            piece = await self.queue.get()
            if piece is _END:
                return b""
            if isinstance(piece, BaseException):
                raise piece
            assert isinstance(piece, bytes)
            encoded = self.encoder.feed(piece)
            if encoded:
                return encoded

    async def _pieces(self, first: bytes) -> AsyncIterator[bytes]:
        """The encoded file, piece by piece, ending with the encoder's flush."""
        piece = first
        while piece:
            yield piece
            piece = await self._next_audio()
        tail = self.encoder.finish()
        if tail:
            yield tail

    async def _audio(self, first: bytes) -> AsyncIterator[bytes]:
        try:
            async for piece in self._pieces(first):
                yield piece
        except Exception as exc:  # past the headers: the stream ends short, and the log says why
            _reported(exc)
        finally:
            await self._stop()

    async def _events(self, first: bytes) -> AsyncIterator[bytes]:
        try:
            async for piece in self._pieces(first):
                yield _sse(wire.delta_event(piece))
            yield _sse(wire.done_event(len(self.params.input)))
        except Exception as exc:
            error = _reported(exc)
            ERRORS.labels(error.code).inc()
            yield _sse(error_body(error) | {"type": "error"})
        finally:
            await self._stop()

    async def _stop(self) -> None:
        """Cancel the synthesis (a client gone, or a failure) and wait for its turn to end."""
        self.cancel.cancel()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await self._task


def _sse(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
