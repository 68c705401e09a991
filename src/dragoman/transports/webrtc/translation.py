"""`POST /v1/realtime/translations/calls`: the interpreter over WebRTC, as OpenAI's
"Realtime translation" guide has browsers use it.

"WebRTC sends source audio as a media track and receives translated speech as a remote
audio track, so you don't need to manually resample or play PCM chunks." The browser
mints an ephemeral key (`POST /v1/realtime/translations/client_secrets`, which binds the
model and the languages), opens the `oai-events` data channel, and POSTs its SDP offer
with that key (`Content-Type: application/sdp`); the answer comes back as a voice-agent
call's does (201, `Location: /v1/realtime/translations/calls/{call_id}`, where `DELETE`
hangs up). The SDK's multipart form (`sdp` and a `session` part) and a `?model=` query
are taken too: the model is the key's binding, else the form's session's, else the
query's. The form's session is applied first, then the key's, before `session.created`.

The call is the agent's call (`call.py`) with the translation codec: the caller's track
is the session's input audio (a `session.input_audio_buffer.append` on the data channel
is refused for the transport, as the agent's append is); the translated speech goes to
the call's playout and out on the server's track, never as `session.output_audio.delta`
on the data channel; every other translation event goes on the data channel. After
`session.close`, the rest of the translation is said and then `session.closed` is sent;
the call plays out what it still holds before it hangs up.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from dragoman.errors import ClientError, InvalidEvent, ServerError
from dragoman.logs import get_logger
from dragoman.metrics import REFUSALS
from dragoman.protocol.realtime.translation_client import TranslationParser
from dragoman.sessions.translation import events as translation
from dragoman.transports.adapters import Frame
from dragoman.transports.interpreter_service import InterpreterService, admission
from dragoman.transports.readiness import Readiness
from dragoman.transports.webrtc.call import Call
from dragoman.transports.webrtc.calls import (
    Calls,
    answered,
    call_policy,
    error_response,
    hang_up_call,
    read_offer,
    set_up,
)
from dragoman.transports.webrtc.channel import PlaybackCut, TrackAudio
from dragoman.transports.webrtc.playout import Playout
from dragoman.transports.websocket.bound import bound_config, start_bound
from dragoman.transports.websocket.translation import TranslationCodec

log = get_logger(__name__)

#: The one stream of translated speech in the call's playout (translation has no responses).
SPEECH = "translation"


class TranslationCallCodec:
    """A translation call's events: OpenAI's translation events, the audio on the tracks."""

    def __init__(self, playout: Playout) -> None:
        self._inner = TranslationCodec()
        self.parser: TranslationParser = self._inner.parser
        self.playout = playout

    def parse(self, frame: Frame) -> translation.ClientEvent:
        if isinstance(frame, TrackAudio):
            return translation.AppendAudio(base64.b64encode(frame).decode("ascii"))
        if isinstance(frame, PlaybackCut):  # never made: translation has no flush
            return translation.Rejected(InvalidEvent("No such event."))
        event = self._inner.parse(frame)
        if isinstance(event, translation.AppendAudio):
            refusal = InvalidEvent(
                "session.input_audio_buffer.append is not taken over WebRTC: the source audio "
                "travels on the call's audio track.",
                code="invalid_event_for_transport",
            )
            return translation.Rejected(refusal, event.event_id)
        return event

    def write(self, event: Any) -> str | None:
        """The data channel's frame of `event`; the speech goes to the playout instead, and the
        playout's own (agent) events have no translation counterpart."""
        if isinstance(event, translation.OutputAudioDelta):
            self.playout.push(SPEECH, event.pcm, event.sample_rate)
            return None
        if isinstance(event, translation.SessionClosed):
            self.playout.finish(SPEECH)  # the resampler's tail, then nothing more
        elif not isinstance(event, translation.ServerEvent):
            return None
        return self._inner.write(event)

    def refusal(self, error: ClientError, frame: Frame) -> translation.ServerEvent:
        return self._inner.refusal(error, frame)

    def failure(self, error: ServerError, event: translation.ClientEvent | None) -> translation.ServerEvent:
        return self._inner.failure(error, event)


def _model(request: Request, form: dict[str, Any] | None, bound: dict[str, Any] | None) -> str | None:
    for source in (bound, form):
        if source is not None and isinstance(source.get("model"), str):
            return str(source["model"])
    return request.query_params.get("model") or None


def translation_calls_router(
    interpreter: Callable[[], InterpreterService | None], readiness: Readiness, calls: Calls
) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/realtime/translations/calls")
    async def create_call(request: Request) -> Response:
        not_ready = readiness.refusal()
        if not_ready is not None:
            return error_response(503, "server_not_ready", not_ready, headers={"Retry-After": "5"})
        try:
            offer, form_session = await read_offer(request)
        except ClientError as exc:
            return error_response(400, exc.code, exc.message, exc.param)
        service = interpreter()
        bound = bound_config(request)
        model = _model(request, form_session, bound)
        refusal = admission(service, model)
        if refusal is not None:
            REFUSALS.labels(refusal.code).inc()
            status = 503 if refusal.later else 404 if refusal.code == "service_unavailable" else 400
            headers = {"Retry-After": "5"} if refusal.later else None
            return error_response(status, refusal.code, refusal.message, headers=headers)
        assert service is not None and model is not None
        service.sessions += 1  # before the first await: concurrent offers cannot all take the last slot
        call_id = calls.new_id()

        def build() -> Call:
            session = service.new_session(model, media_track=True)
            started: Any = session
            for config in (form_session, bound):
                if config is not None:
                    started = start_bound(started, TranslationParser(), config, translation.SessionConfigured)
            policy = call_policy(request)
            return Call(
                call_id,
                service,
                started,
                TranslationCallCodec,
                policy,
                calls.ice_servers,
                lambda drained: _release(service),
                play_out_on_close=True,
                engine_timeout_s=policy.engine_timeout_s,
                service_name="interpreter",
            )

        made = await set_up(build, offer, lambda: _release(service))
        if isinstance(made, Response):
            return made
        log.info("translation call answered", call=call_id, session=made[0].session.session_id, model=model)
        return answered(calls, *made, f"/v1/realtime/translations/calls/{call_id}")

    @router.delete("/v1/realtime/translations/calls/{call_id}")
    async def hang_up(call_id: str) -> Response:
        return await hang_up_call(calls, call_id)

    return router


def _release(service: InterpreterService) -> None:
    service.sessions -= 1
