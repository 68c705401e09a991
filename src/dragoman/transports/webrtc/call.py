"""One WebRTC call: its peer connection, its tracks, and its session on the one driver.

A call runs any session whose service gives lanes: the voice agent's (`calls.py`) or the
interpreter's (`translation.py`); what differs is the codec the call is given, which
turns the caller's track audio into the session's input and sends the session's audio
to the call's playout. It holds its service's admission (the agent's pipeline unit, an
interpreter slot) from its offer to its end, and lets it go through `release`. It starts its
session's driver when the caller's `oai-events` data channel opens (then, not on
connect, `session.created` goes out), or, for a caller that opened no data channel,
when the peer connection is up. It ends, and lets its unit go, on whichever comes
first: a hang-up (`DELETE`), the data channel's or the peer connection's close or
failure, the session's own close, the server's shutdown, or a peer that never connects
within `CONNECT_TIMEOUT_S`. A call made with `play_out_on_close` (the interpreter's,
whose `session.close` promises the rest of the translation) plays out what its playout
still holds before it hangs up on its session's own close.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from aiortc import RTCIceServer

from dragoman.engines.workers import DEFAULT_CALL_TIMEOUT_S
from dragoman.logs import get_logger, log_failure
from dragoman.sessions.base import CloseCode
from dragoman.transports.adapters import Codec
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.driver import SessionDriver
from dragoman.transports.lanes import Lane
from dragoman.transports.webrtc.channel import EVENTS_LABEL, CallChannel
from dragoman.transports.webrtc.codec import INPUT_RATE
from dragoman.transports.webrtc.peer import answer, has_data_channel, new_peer
from dragoman.transports.webrtc.playout import Playout, PlayoutEvent
from dragoman.transports.webrtc.tracks import AnswerTrack, pump_caller_audio

log = get_logger(__name__)

#: How long an answered call may take to connect (ICE, DTLS, the data channel).
CONNECT_TIMEOUT_S = 30.0
#: How long the last events (an error, a shutdown notice) get to leave the data channel.
FLUSH_TIMEOUT_S = 1.0
#: The longest a closing call keeps playing what its playout holds (`play_out_on_close`).
PLAY_OUT_LIMIT_S = 60.0


class CallService(Protocol):
    """What a call needs of the service whose session it runs."""

    def lanes(self) -> dict[str, Lane]: ...

    def session_ended(self, session: Any) -> None: ...


class Call:
    def __init__(
        self,
        call_id: str,
        service: CallService,
        session: Any,
        codec: Callable[[Playout], Codec[Any, Any]],
        policy: ConnectionPolicy,
        ice_servers: list[RTCIceServer] | None,
        release: Callable[[bool], None],
        *,
        play_out_on_close: bool = False,
        engine_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
        **labels: Any,
    ) -> None:
        """`session` runs on `service`'s lanes, its frames through `codec(playout)`; `release`
        (with whether the session drained) gives back the admission the call held."""
        self.id = call_id
        self.service = service
        self.session = session
        self.policy = policy
        self.release = release
        self.play_out_on_close = play_out_on_close
        self.log = log.bind(call=call_id, session=session.session_id, **labels)
        self.channel = CallChannel(policy.max_message_bytes)
        self.playout = Playout(self._notify, on_cut=self.channel.played)
        self.codec = codec(self.playout)
        self.channel.on_close = self._session_closed
        self._session_ended_call = False
        self.driver: SessionDriver[Any, Any, Any, Any] = SessionDriver(
            session,
            self.channel,
            self.codec,
            log=self.log,
            lanes=service.lanes(),
            idle_timeout_s=policy.idle_timeout_s,
            real_time=policy.real_time,
            engine_timeout_s=engine_timeout_s,
        )
        self.peer = new_peer(ice_servers)
        self.track = AnswerTrack(self.playout)
        self._events_channel: Any = None
        self._opened = asyncio.Event()
        self._needs_data_channel = True
        self._started = False
        self._pumps: list[asyncio.Task[None]] = []
        self.task: asyncio.Task[None] | None = None
        self._wire_peer()

    # -- the peer ------------------------------------------------------------------------

    def _wire_peer(self) -> None:
        peer = self.peer

        @peer.on("datachannel")
        def on_datachannel(channel: Any) -> None:
            if channel.label != EVENTS_LABEL or self._events_channel is not None:
                return
            self._events_channel = channel
            self.channel.attach(channel)
            if channel.readyState == "open":
                self._opened.set()
            else:
                channel.on("open", self._opened.set)

        @peer.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "audio":
                pump = pump_caller_audio(track, INPUT_RATE, self.channel.audio)
                self._pumps.append(asyncio.create_task(pump, name=f"caller-audio-{self.id}"))

        @peer.on("connectionstatechange")
        async def on_state() -> None:
            state = peer.connectionState
            self.log.debug("peer connection", state=state)
            if state in ("failed", "closed"):
                self.hang_up()
            elif state == "connected" and not self._needs_data_channel:
                self._opened.set()

    async def connect(self, offer: str) -> str:
        """The SDP answer to the caller's offer."""
        self._needs_data_channel = has_data_channel(offer)
        return await answer(self.peer, offer, self.track)

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the call until it ends, then let everything of it go."""
        try:
            with self.policy.connections.track(self):
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await self._opened.wait()
                except TimeoutError:
                    self.log.info("call never connected; hanging up", seconds=CONNECT_TIMEOUT_S)
                if self._opened.is_set() and not self.channel.ended:
                    self._started = True
                    self.log.info("call connected")
                    await self.driver.run()
        except Exception as exc:
            log_failure(self.log, "call failed", exc)
        finally:
            await self._end()

    def hang_up(self) -> None:
        """End the call (idempotent): the driver sees the channel close, as a peer's close."""
        self.channel.end()
        self._opened.set()

    def _session_closed(self) -> None:
        """The driver closed the channel: the session ended the call itself."""
        self._session_ended_call = True
        self.hang_up()

    def shut_down(self) -> None:
        """The server is stopping (`Connections`): a running session is told why first."""
        if self._started:
            self.driver.shut_down()
        else:
            self.hang_up()

    async def _end(self) -> None:
        self.channel.end()
        self.session.close()
        drained = self.driver.drained
        with contextlib.suppress(Exception):
            await self._flush_events()
        for pump in self._pumps:
            pump.cancel()
        # Only after the session's own normal close (`session.closed`): not on a shutdown or a fault.
        if (
            self.play_out_on_close
            and self._session_ended_call
            and self.session.close_code == CloseCode.NORMAL
        ):
            await self._play_out()
        self.track.stop()
        with contextlib.suppress(Exception):
            await self.peer.close()
        self.service.session_ended(self.session)
        self.release(drained)
        self.log.info(
            "call closed",
            drained=drained,
            played_seconds=round(self.playout.played_seconds, 2),
            **dict(getattr(self.session, "stats", {})),
        )

    async def abandon(self) -> None:
        """A call that was never answered lets its peer connection and its track go."""
        with contextlib.suppress(Exception):
            await self.peer.close()
        self.track.stop()

    async def _play_out(self) -> None:
        """Until the playout holds nothing more, while the caller is still there to hear it."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(self.playout.queued_seconds + 1.0, PLAY_OUT_LIMIT_S)):
                while self.playout.queued_seconds > 0 and self.peer.connectionState == "connected":  # noqa: ASYNC110 (the track takes frames on its own clock)
                    await asyncio.sleep(0.05)

    async def _flush_events(self) -> None:
        channel = self._events_channel
        if channel is None or channel.readyState != "open":
            return
        async with asyncio.timeout(FLUSH_TIMEOUT_S):
            while channel.bufferedAmount > 0:  # noqa: ASYNC110 (aiortc's counter, no event at zero)
                await asyncio.sleep(0.02)

    # -- the playout's events ------------------------------------------------------------

    def _notify(self, event: PlayoutEvent) -> None:
        # Soon, not now: a flush is said after the event that caused it (response.done, speech_started).
        asyncio.get_running_loop().call_soon(self._send_playout, event)

    def _send_playout(self, event: PlayoutEvent) -> None:
        try:
            frame = self.codec.write(event)
        except Exception as exc:
            log_failure(self.log, "event writing failed", exc)
            return
        if frame is not None and self._started:
            self.driver.outgoing.put(frame)
