"""MT protocol v1 over WebSocket: one connection is one `MTSession`.

"The server serializes all MT work on one engine": `MTService` owns the engine and
one worker task that makes every engine call, one at a time, in a worker thread,
taking sessions with pending work in turn (round-robin), so a session streaming
many updates cannot starve another. Each connection has a receive loop (frames
into the session; answers that need no engine, such as the commit fast path, go
out at once) and a sender task, so a slow client never blocks the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from starlette.websockets import WebSocket, WebSocketDisconnect

from dragoman.config import MTSettings, Settings
from dragoman.engines.mt.base import MTEngine
from dragoman.errors import ClientError, ConfigError
from dragoman.logs import get_logger, log_failure
from dragoman.protocol.mt import encode, error_frame, parse_client_message, peek_seq
from dragoman.sessions.mt.events import ClientEvent, Error, ErrorCode, Init
from dragoman.sessions.mt.session import MTSession
from dragoman.streaming.alignatt import AlignAttParams
from dragoman.transports.readiness import Readiness

log = get_logger(__name__)

#: How long a new connection may take to send `init`.
INIT_TIMEOUT_S = 30.0
#: How long shutdown waits for the engine call in flight.
CLOSE_TIMEOUT_S = 60.0
#: WebSocket close codes: protocol error, policy violation (init refused), try again later.
CLOSE_PROTOCOL, CLOSE_POLICY, CLOSE_BUSY = 1002, 1008, 1013


class MTConnection:
    def __init__(self, websocket: WebSocket, session: MTSession) -> None:
        self.websocket = websocket
        self.session = session
        self.open = True
        self.log = log.bind(session=session.session_id)
        self._outgoing: asyncio.Queue[str | None] = asyncio.Queue()

    def flush(self) -> None:
        """Queue the session's events for sending (never blocks the caller)."""
        for event in self.session.drain():
            self._outgoing.put_nowait(encode(event))

    def send_frame(self, frame: str) -> None:
        self._outgoing.put_nowait(frame)

    async def send_loop(self) -> None:
        while (frame := await self._outgoing.get()) is not None:
            await self.websocket.send_text(frame)

    async def finish(self, close_code: int) -> None:
        """Send what is queued, then close the socket."""
        self.flush()
        self._outgoing.put_nowait(None)
        with contextlib.suppress(Exception):  # the client may be gone already
            await self.send_loop()
            await self.websocket.close(code=close_code)


class MTService:
    """The engine, its single worker and the session limit; shared by every MT connection."""

    def __init__(
        self,
        engine_factory: Callable[[], MTEngine],
        *,
        default_preset: str,
        max_sessions: int,
        max_utterance_words: int,
        presets: Mapping[str, AlignAttParams] | None = None,
    ) -> None:
        #: Preset name -> policy; None: the presets of the loaded model (`policy_presets`).
        self._given_presets = dict(presets) if presets is not None else None
        self.presets: dict[str, AlignAttParams] = dict(presets or {})
        self.default_preset = default_preset
        self.max_sessions = max_sessions
        self.max_utterance_words = max_utterance_words
        self._engine_factory = engine_factory
        self.engine: MTEngine | None = None
        self.directions: list[str] = []
        self.sessions = 0
        self._ready: deque[MTConnection] = deque()
        self._forget: list[str] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._in_flight: asyncio.Future[Any] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> MTService:
        mt: MTSettings = settings.mt
        cache_dir: Path = settings.cache_dir

        def load() -> MTEngine:
            from dragoman.engines.registry import create_mt_engine

            engine: MTEngine = create_mt_engine(mt, cache_dir)
            return engine

        return cls(
            load,
            default_preset=mt.preset,
            max_sessions=mt.max_sessions,
            max_utterance_words=mt.max_utterance_words,
        )

    async def start(self) -> None:
        """Load and warm the engine (in threads: it takes seconds), then start the worker."""
        engine = await asyncio.to_thread(self._engine_factory)
        presets = self._given_presets or policy_presets(engine.name, self.default_preset)
        if self.default_preset not in presets:
            engine.close()
            raise ConfigError(
                f"unknown MT preset {self.default_preset!r}; known: {', '.join(sorted(presets))}"
            )
        try:
            await asyncio.to_thread(engine.warm_up)
        except BaseException:
            engine.close()
            raise
        self.presets = presets
        self.engine = engine
        self.directions = list(engine.directions())
        self._worker = asyncio.create_task(self._work(), name="mt-worker")
        log.info(
            "mt ready", **engine.describe().as_dict(), directions=self.directions, preset=self.default_preset
        )

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        if self._in_flight is not None:  # let the engine finish before it is released
            await asyncio.wait([self._in_flight], timeout=CLOSE_TIMEOUT_S)
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def model_names(self) -> list[str]:
        return [self.engine.name] if self.engine is not None else []

    # -- connections --------------------------------------------------------------

    async def serve(self, websocket: WebSocket) -> None:
        """The WebSocket endpoint: one MT protocol v1 session."""
        await websocket.accept()
        engine = self.engine
        try:
            first = await asyncio.wait_for(websocket.receive_text(), INIT_TIMEOUT_S)
        except (TimeoutError, WebSocketDisconnect, RuntimeError, KeyError):
            with contextlib.suppress(Exception):
                await websocket.close(code=CLOSE_POLICY)
            return
        if engine is None or self.sessions >= self.max_sessions:
            message = (
                f"The server is at its limit of {self.max_sessions} MT sessions; try again later."
                if engine is not None
                else "Translation is not available on this server right now."
            )
            await _refuse(websocket, error_frame(ErrorCode.BUSY, message), CLOSE_BUSY)
            return
        try:
            init = parse_client_message(first).to_event()
        except ClientError as exc:
            frame = error_frame(ErrorCode.BAD_PROTOCOL, exc.message, seq=peek_seq(first))
            await _refuse(websocket, frame, CLOSE_PROTOCOL)
            return
        session = MTSession(
            session_id="mt_" + uuid.uuid4().hex[:20],
            engine_name=engine.name,
            directions=self.directions,
            decode=engine.decode,
            default_preset=self.default_preset,
            max_utterance_words=self.max_utterance_words,
            presets=self.presets,
        )
        conn = MTConnection(websocket, session)
        self.sessions += 1
        try:
            await self._run(conn, init)
        finally:
            self.sessions -= 1
            conn.open = False
            with contextlib.suppress(ValueError):
                self._ready.remove(conn)
            self._forget.append(session.session_id)
            self._wake.set()
            conn.log.info("mt session closed", **session.stats)

    async def _run(self, conn: MTConnection, init: ClientEvent) -> None:
        session = conn.session
        session.receive(init)
        if session.closed:
            await conn.finish(CLOSE_POLICY if isinstance(init, Init) else CLOSE_PROTOCOL)
            return
        setup = session.setup
        conn.log.info("mt session opened", direction=setup and setup.direction, preset=setup and setup.preset)
        sender = asyncio.create_task(conn.send_loop(), name=f"mt-send-{session.session_id}")
        conn.flush()
        try:
            while True:  # after init_ok nothing closes the session but the client
                message = await conn.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                self._receive(conn, message.get("text"), message.get("bytes"))
        except WebSocketDisconnect:
            return
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender

    def _receive(self, conn: MTConnection, text: str | None, data: bytes | None) -> None:
        raw: str | bytes = text if text is not None else (data or b"")
        try:
            event = parse_client_message(raw).to_event()
        except ClientError as exc:
            conn.send_frame(error_frame(ErrorCode.BAD_PROTOCOL, exc.message, seq=peek_seq(raw)))
            return
        try:
            conn.session.receive(event)
        except Exception as exc:  # a session bug must not end the connection
            self._report(conn, exc, "mt event handling failed", seq=getattr(event, "seq", None))
        conn.flush()
        self._schedule(conn)

    @staticmethod
    def _report(conn: MTConnection, exc: Exception, what: str, seq: int | None) -> None:
        error_id = log_failure(conn.log, what, exc, seq=seq)
        message = f"The server failed to process the update (error id {error_id})."
        conn.flush()  # what the session said before failing goes first
        conn.send_frame(encode(Error(ErrorCode.PROCESSING_FAILED, message, seq=seq, error_id=error_id)))

    # -- the worker ---------------------------------------------------------------

    def _schedule(self, conn: MTConnection) -> None:
        if conn.open and conn.session.has_job() and conn not in self._ready:
            self._ready.append(conn)
            self._wake.set()

    async def _work(self) -> None:
        while True:
            if self._forget:
                await self._call(self._forget_caches)
            if not self._ready:
                self._wake.clear()
                await self._wake.wait()
                continue
            conn = self._ready.popleft()
            try:
                job = conn.session.next_job() if conn.open else None
            except Exception as exc:  # a session bug: that update is dropped, the worker goes on
                self._report(conn, exc, "mt planning failed", seq=None)
                self._schedule(conn)
                continue
            if job is None:
                continue
            engine = self.engine
            assert engine is not None
            try:
                began = time.perf_counter()
                draft = await self._call(functools.partial(engine.draft, job.request))
                conn.log.debug(
                    "mt draft",
                    seq=job.seq,
                    kind=job.kind.value,
                    words=len(job.request.source_words),
                    tokens=len(draft.token_ids),
                    computed=draft.computed_tokens,
                    ms=round((time.perf_counter() - began) * 1000),
                )
                conn.session.job_done(job, draft)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error_id = log_failure(conn.log, "mt draft failed", exc, seq=job.seq, kind=job.kind.value)
                conn.session.job_failed(job, error_id)
            conn.flush()
            self._schedule(conn)  # to the back of the line: round-robin

    async def _call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` in a thread; shutdown waits for it rather than release the engine under it."""
        self._in_flight = asyncio.ensure_future(asyncio.to_thread(fn))
        try:
            return await asyncio.shield(self._in_flight)
        finally:
            if self._in_flight.done():
                self._in_flight = None

    def _forget_caches(self) -> None:
        keys, self._forget = self._forget, []
        engine = self.engine
        for key in keys:
            if engine is not None:
                engine.forget(key)


def policy_presets(model: str, default_preset: str) -> dict[str, AlignAttParams]:
    """The AlignAtt policy of each preset a session of `model` may choose.

    The runtime presets (`dragoman.engines.mt.presets`, the only place presets are
    defined) of the loaded model, plus the one the server was started with (its model
    may have been replaced by the user's own).
    """
    from dragoman.engines.mt.presets import PRESETS, presets_for_model

    chosen = dict(presets_for_model(model))
    if default_preset in PRESETS:
        chosen.setdefault(default_preset, PRESETS[default_preset])
    try:
        return {name: _policy(p.policy) for name, p in chosen.items()}
    except TypeError as exc:  # a policy key that is no AlignAttParams field
        raise ConfigError(f"invalid MT preset policy: {exc}") from exc


def _policy(fields: Mapping[str, Any]) -> AlignAttParams:
    return replace(AlignAttParams(), **fields)


async def _refuse(websocket: WebSocket, frame: str, close_code: int) -> None:
    with contextlib.suppress(Exception):
        await websocket.send_text(frame)
        await websocket.close(code=close_code)


def mt_router(
    service: MTService | Callable[[], MTService | None],
    path: str = "/",
    *,
    readiness: Readiness | None = None,
) -> APIRouter:
    """A router serving MT protocol v1 at `path`: "/" for `dragoman mt-server`, "/v1/mt" in the app.

    `service` may be a callable returning the service (None while it is not loaded),
    for apps that create it in their lifespan. While `readiness` says the engines are
    not ready, a connection is refused as `busy` (close 1013: try again later).
    """
    router = APIRouter()

    @router.websocket(path)
    async def mt_endpoint(websocket: WebSocket) -> None:
        not_ready = readiness.refusal() if readiness is not None else None
        current = service if isinstance(service, MTService) else service()
        if not_ready is not None or current is None:
            await websocket.accept()
            message = not_ready or "Translation is not enabled on this server."
            await _refuse(websocket, error_frame(ErrorCode.BUSY, message), CLOSE_BUSY)
            return
        await current.serve(websocket)

    return router
