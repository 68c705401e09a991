"""`POST /v1/audio/transcriptions`, as OpenAI serves it: multipart in, a transcript out.

The upload is bounded before it is read (`Content-Length` against `max_bytes`: 413), its
fields are checked before any work (400), then the job waits for a file slot (429 past
the queue), the file is decoded in a thread and transcribed on the shared ASR worker
(`file_transcription.py`). With `stream=true` the answer is server-sent events, one
`transcript.text.delta` per window as the windows finish in order, then
`transcript.text.done`. The `model` field is taken as any name, as the Realtime session
takes it; the engine that serves the file is named in the `openai-model` header.

Access control is the guard's (transports/guard.py): it covers every HTTP route.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.datastructures import UploadFile

from dragoman.audio.files import decode_audio_file
from dragoman.config import FileTranscriptionSettings
from dragoman.engines.workers.activity import ACTIVITY
from dragoman.errors import DragomanError, FileTooLarge, InvalidValue, ServerError
from dragoman.logs import get_logger, log_failure
from dragoman.metrics import ERRORS, REFUSALS
from dragoman.protocol import audio_transcriptions as wire
from dragoman.sessions.file_transcription import FileTranscription, WindowText, delta_of
from dragoman.transports.file_transcription import FilesBusy, FileTranscriber
from dragoman.transports.forms import multipart_form
from dragoman.transports.readiness import Readiness
from dragoman.transports.services import TranscriptionService

log = get_logger(__name__)

#: Room for the multipart framing and the text fields beside the file.
_FORM_OVERHEAD = 64 * 1024


def _error(error: DragomanError) -> JSONResponse:
    ERRORS.labels(error.code).inc()
    headers = None
    if isinstance(error, FilesBusy):
        REFUSALS.labels("files_busy").inc()
        headers = {"Retry-After": "2"}
    return JSONResponse(wire.error_body(error), status_code=wire.status_of(error), headers=headers)


def _refusal(
    status: int,
    code: str,
    message: str,
    *,
    kind: str = "invalid_request_error",
    retry_after: int | None = None,
) -> JSONResponse:
    """OpenAI's error body for a request this server does not take now or at all."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return JSONResponse(body, status_code=status, headers=headers)


def _sse(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


def audio_transcriptions_router(
    service: Callable[[], TranscriptionService | None],
    settings: FileTranscriptionSettings,
    readiness: Readiness,
) -> APIRouter:
    router = APIRouter()
    holder: dict[str, FileTranscriber] = {}

    def transcriber() -> FileTranscriber | None:
        """One per running service (made on first use, once the engine is loaded)."""
        running = service()
        if running is None or running.engine is None or running.worker is None or running.vad_model is None:
            return None
        current = holder.get("files")
        if current is None or current.worker is not running.worker:
            current = holder["files"] = FileTranscriber(
                running.engine, running.worker, running.vad_model, settings
            )
        return current

    @router.post("/v1/audio/transcriptions")
    async def create_transcription(request: Request) -> Response:
        not_ready = readiness.refusal()
        if not_ready is not None:
            return _refusal(503, "server_not_ready", not_ready, kind="server_error", retry_after=5)
        files = transcriber()
        if files is None:
            return _refusal(404, "service_unavailable", "Transcription is not enabled on this server.")
        try:
            return await _serve(request, files, settings)
        except ClientGone:
            return Response(status_code=499)  # nginx's "client closed request": nobody reads it
        except Exception as exc:
            return _error(_reported(exc))

    return router


def _too_large(limit: int) -> FileTooLarge:
    return FileTooLarge(f"The file is larger than this server's limit of {limit} bytes.", param="file")


async def _read_form(request: Request, limit: int) -> tuple[wire.TranscriptionParams, bytes]:
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit():
        raise InvalidValue("The request needs a Content-Length header.", param="file")
    if int(declared) > limit + _FORM_OVERHEAD:
        raise _too_large(limit)
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidValue("The request must be multipart/form-data, with the audio in 'file'.", param="file")
    async with multipart_form(request, "file", max_files=1, max_fields=32) as form:
        upload = form.get("file")
        fields: dict[str, list[str]] = {}
        for key, value in form.multi_items():
            if isinstance(value, str):
                fields.setdefault(key, []).append(value)
        params = wire.TranscriptionParams.from_form(fields)
        if not isinstance(upload, UploadFile):
            raise InvalidValue("you must provide a file parameter", param="file")
        if upload.size is not None and upload.size > limit:
            raise _too_large(limit)
        data = await upload.read()
        if len(data) > limit:
            raise _too_large(limit)
        return params, data


async def _serve(request: Request, files: FileTranscriber, settings: FileTranscriptionSettings) -> Response:
    params, data = await _read_form(request, settings.max_bytes)
    asked = params.file_request()
    files.check(asked)
    release = await files.admission.acquire()
    try:
        # Counted (`engines.workers.activity`): decoding a long file computes for seconds.
        decode = functools.partial(decode_audio_file, data, max_seconds=settings.max_seconds)
        audio = await asyncio.to_thread(ACTIVITY.counted(decode))
        del decode
        del data
        headers = {"openai-model": files.engine.name}
        transcription = files.transcription(asked)
        if params.stream:
            stream = _stream(files, audio.samples, audio.seconds, transcription, release)
            # The stream releases its slot when it ends (and the background task, should the
            # response never start it).
            finally_release, release = release, _noop
            return StreamingResponse(
                stream,
                media_type="text/event-stream",
                headers=headers,
                background=BackgroundTask(finally_release),
            )
        pieces = await _unless_gone(request, _collect(files, audio.samples, transcription))
        result = transcription.transcript(pieces, audio.seconds)
    finally:
        release()
    if params.response_format == "json":
        return JSONResponse(wire.json_body(result), headers=headers)
    if params.response_format == "verbose_json":
        return JSONResponse(wire.verbose_body(result, params), headers=headers)
    if params.response_format == "srt":
        return PlainTextResponse(wire.srt(result.segments), headers=headers)
    if params.response_format == "vtt":
        return PlainTextResponse(wire.vtt(result.segments), media_type="text/vtt", headers=headers)
    return PlainTextResponse(wire.text_body(result), headers=headers)


def _noop() -> None:
    pass


#: How often a long job looks whether its client is still there.
_DISCONNECT_POLL_S = 0.5


async def _collect(
    files: FileTranscriber, samples: Any, transcription: FileTranscription
) -> list[WindowText]:
    return [piece async for piece in files.run(samples, transcription)]


async def _unless_gone(request: Request, work: Coroutine[Any, Any, list[WindowText]]) -> list[WindowText]:
    """`work`'s result; cancelled (its windows with it) when the client disconnects first, so
    a client that gave up on a long file does not keep the engine busy."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait([task], timeout=_DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                log.info("file transcription abandoned: the client disconnected")
                raise ClientGone("the client disconnected")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait([task])


class ClientGone(ServerError):
    """The client went away before its transcript was ready; nobody reads the answer."""

    code = "client_disconnected"


async def _stream(
    files: FileTranscriber,
    samples: Any,
    seconds: float,
    transcription: FileTranscription,
    release: Callable[[], None],
) -> AsyncIterator[bytes]:
    """Deltas as windows finish in order, then the done event; a failure is an error event."""
    pieces: list[WindowText] = []
    text = ""
    try:
        async for piece in files.run(samples, transcription):
            pieces.append(piece)
            delta = delta_of(text, piece.result.text)
            if delta:
                text += delta
                yield _sse(wire.delta_event(delta))
        yield _sse(wire.done_event(transcription.transcript(pieces, seconds)))
    except Exception as exc:
        error = _reported(exc)
        ERRORS.labels(error.code).inc()
        yield _sse(wire.error_body(error) | {"type": "error"})
    finally:
        release()


def _reported(exc: Exception) -> DragomanError:
    """What the client is told: its own fault quoted, anything else logged under an error id."""
    if isinstance(exc, DragomanError) and not isinstance(exc, ServerError):
        return exc
    error_id = log_failure(log, "file transcription failed", exc)
    return exc if isinstance(exc, ServerError) else ServerError(str(exc), error_id=error_id)
