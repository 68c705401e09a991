"""The WebRTC transport's pure parts, with no sockets, no peer connection and no models:
the server-side playout buffer, the data channel as the driver's channel, the call's
codec (WebRTC's three differences from WebSocket), and the agent session's media-track mode."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import numpy as np
import pytest

from dragoman.engines.llm.base import TextPiece
from dragoman.errors import ClientError, MessageTooBig
from dragoman.protocol.realtime.generation import Generation
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.jobs import LLM
from dragoman.sessions.speech.events import SpeechStarted
from dragoman.transports.webrtc import channel as channel_module
from dragoman.transports.webrtc import tracks
from dragoman.transports.webrtc.calls import configure
from dragoman.transports.webrtc.channel import CallChannel, PlaybackCut, TrackAudio
from dragoman.transports.webrtc.codec import CallCodec
from dragoman.transports.webrtc.peer import check_offer, has_data_channel, ice_servers
from dragoman.transports.webrtc.playout import FRAME_SAMPLES, TRACK_RATE, Playout, PlayoutEvent
from tests.unit.realtime_sdk import validate
from tests.unit.test_agent_session import Agent, text_item, types

TTS_RATE = 24_000


def tone(seconds: float, rate: int = TTS_RATE, level: float = 0.5) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 440 * t) * level * 32767).astype("<i2").tobytes()


class Heard:
    def __init__(self) -> None:
        self.events: list[PlayoutEvent] = []

    def __call__(self, event: PlayoutEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.events]


def play(playout: Playout, seconds: float) -> np.ndarray:
    return np.concatenate([playout.next_frame() for _ in range(round(seconds * 50))])


# -- the playout ------------------------------------------------------------------------


def test_silence_when_nothing_is_queued() -> None:
    playout = Playout(Heard())
    frame = playout.next_frame()
    assert frame.dtype == np.int16 and len(frame) == FRAME_SAMPLES == TRACK_RATE // 50
    assert not frame.any()


def test_a_response_plays_out_resampled_in_20ms_frames_started_then_stopped() -> None:
    heard = Heard()
    playout = Playout(heard)
    playout.push("resp_1", tone(0.5), TTS_RATE)
    assert heard.events == [], "started goes out when the first frame is played, not when queued"
    first = playout.next_frame()
    assert np.abs(first).max() > 10_000
    assert heard.events == [agent.OutputAudioStarted("resp_1")]
    playout.finish("resp_1")
    audio = np.concatenate([first, play(playout, 0.6)])
    loud = np.flatnonzero(np.abs(audio) > 1000)
    # 0.5 s at 24 kHz is 0.5 s at 48 kHz: the resampler keeps the clock.
    assert abs((loud[-1] - loud[0]) / TRACK_RATE - 0.5) < 0.01
    assert heard.events == [agent.OutputAudioStarted("resp_1"), agent.OutputAudioStopped("resp_1")]
    assert not play(playout, 0.1).any()


def test_stopped_waits_for_the_response_to_end_even_when_the_buffer_runs_dry() -> None:
    heard = Heard()
    playout = Playout(heard)
    playout.push("resp_1", tone(0.1), TTS_RATE)
    play(playout, 0.3)  # TTS is behind: the track plays silence meanwhile
    assert heard.kinds() == ["OutputAudioStarted"]
    playout.push("resp_1", tone(0.1), TTS_RATE)
    assert np.abs(play(playout, 0.1)).max() > 10_000
    playout.finish("resp_1")
    play(playout, 0.1)
    assert heard.kinds() == ["OutputAudioStarted", "OutputAudioStopped"]


def test_a_flush_drops_the_unplayed_audio_and_says_cleared() -> None:
    heard = Heard()
    playout = Playout(heard)
    playout.push("resp_1", tone(3.0), TTS_RATE)
    play(playout, 0.2)
    assert playout.queued_seconds > 2.5
    playout.flush()
    assert playout.queued_seconds == 0
    assert heard.events == [agent.OutputAudioStarted("resp_1"), agent.OutputAudioCleared("resp_1")]
    playout.push("resp_1", tone(0.5), TTS_RATE)  # a late piece of the flushed response
    assert not play(playout, 0.5).any()
    playout.finish("resp_1")
    assert heard.kinds() == ["OutputAudioStarted", "OutputAudioCleared"], "no stopped after cleared"


def test_audio_never_heard_is_dropped_without_events() -> None:
    heard = Heard()
    playout = Playout(heard)
    playout.push("resp_1", tone(1.0), TTS_RATE)
    playout.flush()
    assert heard.events == []


def test_the_next_response_waits_for_the_one_playing() -> None:
    heard = Heard()
    playout = Playout(heard)
    playout.push("resp_1", tone(0.1), TTS_RATE)
    playout.push("resp_2", tone(0.1), 22_050)
    play(playout, 0.2)
    assert heard.kinds() == ["OutputAudioStarted"], "resp_1 is not finished: resp_2 must not start"
    playout.finish("resp_1")
    playout.finish("resp_2")
    play(playout, 0.3)
    assert heard.events == [
        agent.OutputAudioStarted("resp_1"),
        agent.OutputAudioStopped("resp_1"),
        agent.OutputAudioStarted("resp_2"),
        agent.OutputAudioStopped("resp_2"),
    ]


def test_a_flush_says_how_much_of_each_item_was_heard() -> None:
    cuts: list[tuple[str, int]] = []
    playout = Playout(Heard(), on_cut=lambda item_id, ms: cuts.append((item_id, ms)))
    playout.push("resp_1", tone(3.0), TTS_RATE, "item_1")
    play(playout, 0.4)
    playout.flush()
    (cut,) = cuts
    assert cut[0] == "item_1" and 380 <= cut[1] <= 400, cut
    playout.push("resp_2", tone(1.0), TTS_RATE, "item_2")
    playout.flush()
    assert len(cuts) == 1, "an answer never heard is not cut: it was never played"


# -- the data channel as the driver's channel ------------------------------------------------


async def test_messages_and_track_audio_come_in_arrival_order_and_audio_runs_join() -> None:
    channel = CallChannel(max_bytes=100)
    channel.audio(b"\x01\x00")
    channel.audio(b"\x02\x00")
    channel.message('{"type": "response.create"}')
    channel.audio(b"\x03\x00")
    channel.message(b"\x00binary")
    first = await channel.receive()
    assert isinstance(first, TrackAudio) and first == b"\x01\x00\x02\x00"
    assert await channel.receive() == '{"type": "response.create"}'
    assert await channel.receive() == TrackAudio(b"\x03\x00")
    binary = await channel.receive()
    assert binary == b"\x00binary" and not isinstance(binary, TrackAudio)
    channel.end()
    assert await channel.receive() is None


async def test_receive_waits_for_the_next_frame() -> None:
    channel = CallChannel()
    waiting = asyncio.ensure_future(channel.receive())
    await asyncio.sleep(0)
    assert not waiting.done()
    channel.message("{}")
    assert await waiting == "{}"


async def test_a_message_past_the_limit_is_too_big() -> None:
    channel = CallChannel(max_bytes=10)
    channel.message("x" * 11)
    with pytest.raises(MessageTooBig):
        await channel.receive()


async def test_unread_track_audio_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel_module, "MAX_PENDING_AUDIO_BYTES", 6)
    channel = CallChannel()
    channel.audio(b"aa")
    channel.message("{}")
    channel.audio(b"bb")
    channel.audio(b"cc")
    channel.audio(b"dd")
    assert await channel.receive() == "{}", "the oldest audio went first"
    assert await channel.receive() == b"bbccdd"


class FakeDataChannel:
    """What CallChannel uses of aiortc's RTCDataChannel."""

    def __init__(self, state: str = "open") -> None:
        self.readyState = state
        self.sent: list[str] = []
        self.handlers: dict[str, Any] = {}

    def on(self, name: str, handler: Any) -> None:
        self.handlers[name] = handler

    def send(self, frame: str) -> None:
        self.sent.append(frame)


async def test_the_data_channel_feeds_and_takes_frames_and_its_close_ends_the_call() -> None:
    channel = CallChannel()
    closed: list[bool] = []
    channel.on_close = lambda: closed.append(True)
    data = FakeDataChannel()
    channel.attach(data)
    data.handlers["message"]('{"type": "response.cancel"}')
    assert await channel.receive() == '{"type": "response.cancel"}'
    await channel.send("out")
    assert data.sent == ["out"]
    data.readyState = "closed"
    await channel.send("lost")
    assert data.sent == ["out"]
    data.handlers["close"]()
    assert await channel.receive() is None
    await channel.close(1000)
    assert closed == [True]


# -- the call's codec --------------------------------------------------------------------------


class Codec:
    def __init__(self, interrupts: bool = True) -> None:
        self.heard = Heard()
        self.playout = Playout(self.heard)
        self.codec = CallCodec(self.playout, interrupts=lambda: interrupts)

    def write(self, event: agent.ServerEvent) -> dict[str, Any] | None:
        frame = self.codec.write(event)
        if frame is None:
            return None
        wire: dict[str, Any] = json.loads(frame)
        validate(wire, Generation.GA)
        return wire


def where(response_id: str = "resp_1") -> dict[str, Any]:
    return {"response_id": response_id, "item_id": "item_1", "output_index": 0, "content_index": 0}


def test_track_audio_is_the_sessions_input_and_append_is_refused_for_the_transport() -> None:
    codec = Codec().codec
    assert codec.parse(TrackAudio(b"\x01\x00")) == agent.AppendAudio(base64.b64encode(b"\x01\x00").decode())
    append = json.dumps({"type": "input_audio_buffer.append", "audio": "AAAA", "event_id": "e7"})
    refused = codec.parse(append)
    assert isinstance(refused, agent.Rejected) and refused.event_id == "e7"
    assert refused.error.code == "invalid_event_for_transport"
    assert codec.parse(json.dumps({"type": "output_audio_buffer.clear"})) == agent.ClearOutputAudio()


def test_the_answers_audio_goes_to_the_playout_not_the_data_channel() -> None:
    codec = Codec()
    created = agent.ResponseCreated(agent.Response("resp_1", output_rate=TTS_RATE))
    assert codec.write(created) is not None
    delta = agent.AudioDelta(**where(), delta=base64.b64encode(tone(0.2)).decode())
    assert codec.write(delta) is None
    assert codec.playout.queued_seconds > 0.15
    assert codec.write(agent.AudioTranscriptDelta(**where(), delta="Hi.")) is not None


def fill(codec: Codec) -> None:
    codec.write(agent.ResponseCreated(agent.Response("resp_1")))
    codec.write(agent.AudioDelta(**where(), delta=base64.b64encode(tone(2.0)).decode()))
    codec.playout.next_frame()


def test_a_cancelled_response_flushes_the_playout() -> None:
    codec = Codec()
    fill(codec)
    done = codec.write(
        agent.ResponseDone(agent.Response("resp_1", status="cancelled", reason="client_cancelled"))
    )
    assert done is not None and done["type"] == "response.done"
    assert codec.playout.queued_seconds == 0
    assert codec.heard.kinds() == ["OutputAudioStarted", "OutputAudioCleared"]


def test_a_completed_response_plays_on_to_its_end() -> None:
    codec = Codec()
    fill(codec)
    codec.write(agent.ResponseDone(agent.Response("resp_1", status="completed")))
    assert codec.playout.queued_seconds > 1.5
    play(codec.playout, 2.1)
    assert codec.heard.kinds() == ["OutputAudioStarted", "OutputAudioStopped"]


@pytest.mark.parametrize("interrupts", [True, False])
def test_speech_started_flushes_only_when_it_interrupts(interrupts: bool) -> None:
    codec = Codec(interrupts)
    fill(codec)
    codec.write(SpeechStarted(audio_start_ms=100, item_id="item_2"))
    assert (codec.playout.queued_seconds == 0) is interrupts


@pytest.mark.parametrize("kind", ["output_audio_buffer.clear", "response.cancel"])
def test_clear_and_cancel_flush_what_is_queued(kind: str) -> None:
    codec = Codec()
    fill(codec)
    codec.codec.parse(json.dumps({"type": kind}))
    assert codec.playout.queued_seconds == 0
    assert codec.heard.kinds() == ["OutputAudioStarted", "OutputAudioCleared"]


def test_playout_events_are_written_as_openais() -> None:
    codec = Codec()
    for event in (
        agent.OutputAudioStarted("r"),
        agent.OutputAudioStopped("r"),
        agent.OutputAudioCleared("r"),
    ):
        wire = codec.write(event)
        assert wire is not None and wire["response_id"] == "r"


def test_a_playback_cut_is_the_sessions_truncate() -> None:
    codec = Codec().codec
    assert codec.parse(PlaybackCut("item_1", 420)) == agent.TruncateItem("item_1", 0, 420)


async def test_the_channel_carries_a_cut_in_order_with_the_rest() -> None:
    channel = CallChannel()
    channel.message('{"type": "response.cancel"}')
    channel.played("item_1", 420)
    assert await channel.receive() == '{"type": "response.cancel"}'
    cut = await channel.receive()
    assert isinstance(cut, PlaybackCut) and (cut.item_id, cut.audio_end_ms) == ("item_1", 420)


# -- the session in media-track mode ----------------------------------------------------------


def media_agent() -> Agent:
    session = Agent()
    session.session.media_track = True
    session.events()
    return session


def test_output_audio_buffer_clear_cuts_off_the_response_in_progress() -> None:
    session = media_agent()
    assert session.send("output_audio_buffer.clear") == [], "nothing in progress: nothing to say"
    session.send("conversation.item.create", item=text_item("Tell a story."))
    session.send("response.create")
    llm = session.job(LLM)
    session.session.job_progress(llm, TextPiece("Once upon a time. "))
    session.speak()
    events = session.send("output_audio_buffer.clear")
    assert types(events)[-1] == "response.done"
    done = events[-1]["response"]
    assert (done["status"], done["status_details"]["reason"]) == ("cancelled", "client_cancelled")
    assert session.session.response is None


def test_the_input_rate_is_the_transports_whatever_an_update_names() -> None:
    session = media_agent()
    (updated,) = session.send(
        "session.update",
        session={
            "type": "realtime",
            "instructions": "Hi.",
            "audio": {"input": {"format": {"type": "audio/pcm"}}},
        },
    )
    assert updated["type"] == "session.updated"
    assert session.session.config.input_rate == 24_000 and session.session.config.instructions == "Hi."


def test_configure_puts_the_calls_settings_in_session_created() -> None:
    session = Agent()
    session.session.media_track = True
    session.session.configure({"instructions": "Be brief."})
    (created,) = session.events()
    assert created["type"] == "session.created" and created["session"]["instructions"] == "Be brief."


# -- the peer's inputs ---------------------------------------------------------------------------


def test_ice_servers_come_from_a_json_list() -> None:
    assert ice_servers({}) is None
    servers = ice_servers(
        {
            "DRAGOMAN_ICE_SERVERS": json.dumps(
                [
                    "stun:stun.example.org:3478",
                    {"urls": ["turn:t.example.org"], "username": "u", "credential": "c"},
                ]
            )
        }
    )
    assert servers is not None and [s.urls for s in servers] == [
        "stun:stun.example.org:3478",
        ["turn:t.example.org"],
    ]
    assert servers[1].username == "u" and servers[1].credential == "c"
    assert ice_servers({"SPEECH_TO_SPEECH_ICE_SERVERS": "[]"}) == []
    for bad in ("{", '{"urls": "stun:x"}', "[3]"):
        with pytest.raises(ValueError):
            ice_servers({"DRAGOMAN_ICE_SERVERS": bad})


def test_an_offer_needs_sdp_with_audio() -> None:
    offer = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
    check_offer(offer)
    assert not has_data_channel(offer)
    assert has_data_channel(offer + "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n")
    for bad in ("", "hello", "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"):
        with pytest.raises(Exception) as refused:
            check_offer(bad)
        assert getattr(refused.value, "code", None) == "invalid_value"


def test_a_calls_configs_apply_in_order_the_keys_last() -> None:
    session = Agent()
    session.session.media_track = True
    form = {"instructions": "From the form.", "audio": {"output": {"voice": "joe"}}}
    configure(session.session, form, None, {"instructions": "Bound to the key."})
    (created,) = session.events()
    assert created["type"] == "session.created"
    assert created["session"]["instructions"] == "Bound to the key."
    assert created["session"]["audio"]["output"]["voice"] == "joe"
    for bad in ({"audio": {"output": {"voice": "nobody"}}}, {"type": "transcription"}, {"instructions": 3}):
        with pytest.raises(ClientError):
            configure(session.session, bad)


async def test_the_frame_clock_paces_20ms_frames_and_starts_over_after_a_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    # The modules `tracks` reads its clock from and sleeps with (`tracks.time`, `tracks.asyncio`).
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(asyncio, "sleep", sleep)
    clock = tracks.FrameClock()
    assert [await clock.tick() for _ in range(3)] == [0, FRAME_SAMPLES, 2 * FRAME_SAMPLES]
    assert slept == [pytest.approx(0.02), pytest.approx(0.02)]
    now[0] += 1.0  # the loop stalled for a second: no burst of 50 frames
    assert await clock.tick() == 0
    assert await clock.tick() == FRAME_SAMPLES and slept[-1] == pytest.approx(0.02)
