"""Replicas behind a real load balancer, with every engine remote (issue 27, item 3): nginx in
front of two `dragoman serve` front-ends whose ASR and voices are on a third dragoman and whose
LLM is a real `llama_cpp.server` (tests/e2e/fleet.py), all on loopback.

Transcription and agent sessions through nginx land on both front-ends and are served by the
remote engines; an `ek_` key minted on one replica opens a session on the other, once; a WebRTC
call placed through nginx is reached there by its sideband and hung up by a `DELETE` that nginx
sends to the replica the call id names; and a front-end stopped while its clients speak drains:
each item its clients committed gets its transcript before the error event and the 1001 close,
while the other front-end's sessions go on transcribing and take the new ones. Then a
replacement front-end joins (nginx reloaded) and is killed outright while its clients speak:
they learn at once that the connection is gone, and the other's sessions go on. Every event is
validated against the openai SDK's types.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from harness.realtime_helpers import b64, load_audio, reference, validate, wer
from harness.server import Server
from tests.e2e.fleet import API_KEY, REPLICAS, Fleet, fleet, metric, sessions

pytestmark = pytest.mark.e2e

#: How long a stopped front-end lets its sessions run on: its clients' two clips (15 s of
#: speech) and their transcripts, from a loaded 2-core machine's remote ASR, fit well within.
DRAIN_S = 30.0
CLIPS = ("asr/en/en_ls-testclean_1995-1837-0001.wav", "asr/en/en_ls-devclean_1272-128104-0000.wav")
PUSH_TO_TALK = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
COMPLETED = "conversation.item.input_audio_transcription.completed"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Fleet]:
    with fleet(tmp_path_factory.mktemp("fleet"), cache_dir, DRAIN_S) as running:
        yield running


@functools.cache
def speech(clip: str) -> np.ndarray:
    return load_audio(clip, 24_000)


async def connect(url: str, query: str = "intent=transcription", key: str = API_KEY) -> ClientConnection:
    """A Realtime session at `url` (nginx or a replica), its `session.created` read."""
    ws = await websockets.connect(
        url.replace("http", "ws", 1) + "/v1/realtime?" + query,
        additional_headers={"Authorization": f"Bearer {key}"},
    )
    created = await next_event(ws)
    assert created["type"] == "session.created", created
    return ws


async def next_event(ws: ClientConnection, limit: float = 180.0) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), limit))
    validate(event)
    return event


async def until(ws: ClientConnection, kind: str, limit: float = 180.0) -> dict[str, Any]:
    while (event := await next_event(ws, limit))["type"] != kind:
        assert event["type"] != "error", event
    return event


async def transcribe(ws: ClientConnection, clip: str = CLIPS[0]) -> str:
    """One utterance, sent at once and committed by the client."""
    await ws.send(json.dumps({"type": "session.update", "session": PUSH_TO_TALK}))
    audio = speech(clip)
    for at in range(0, len(audio), 4800):
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(audio[at : at + 4800])}))
    await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
    return str((await until(ws, COMPLETED))["transcript"])


async def answer(ws: ClientConnection) -> dict[str, Any]:
    """The voice agent's spoken answer to a typed question: its `response.done`, once audio came."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}
    await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
    await ws.send(json.dumps({"type": "response.create"}))
    audio = 0
    while (event := await next_event(ws))["type"] != "response.done":
        assert event["type"] != "error", event
        audio += event["type"] == "response.output_audio.delta"
    assert audio, f"no audio before {event}"
    return event


def health(server: Server) -> dict[str, Any]:
    with urllib.request.urlopen(server.http + "/health", timeout=10) as response:
        return dict(json.loads(response.read()))


def mint(server: Server) -> str:
    request = urllib.request.Request(
        server.http + "/v1/realtime/client_secrets",
        data=json.dumps({"session": {"type": "transcription"}}).encode(),
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["value"])


# -- sessions on both replicas, on remote engines ------------------------------------------


async def test_sessions_land_on_both_front_ends_and_run_on_the_remote_engines(deployed: Fleet) -> None:
    for front in deployed.fronts.values():
        remotes = {remote["role"]: remote for remote in health(front)["remotes"]}
        assert set(remotes) >= {"asr", "tts", "llm"} and all(r["reachable"] for r in remotes.values()), (
            remotes
        )
    listeners = [await connect(deployed.url) for _ in REPLICAS]
    agents = [await connect(deployed.url, "model=dragoman-agent") for _ in REPLICAS]
    try:
        for front in deployed.fronts.values():
            # Capacity, as an autoscaler reads it: open, allowed, and the engines' queues.
            assert sessions(front, "transcription") == 1 and sessions(front, "agent") == 1
            assert metric(front, "dragoman_sessions_allowed", service="agent") == 2
            assert (metric(front, "dragoman_sessions_allowed", service="transcription") or 0) >= 2
            for engine in ("asr", "llm", "tts"):
                depth = metric(front, "dragoman_engine_queue_depth", service="agent", engine=engine)
                assert depth is not None and depth >= 0, engine
        transcripts = await asyncio.gather(*(transcribe(ws) for ws in listeners))
        for text in transcripts:
            assert wer([reference(CLIPS[0])], [text]) < 0.3, text
        for done in await asyncio.gather(*(answer(ws) for ws in agents)):
            assert done["response"]["status"] == "completed", done
    finally:
        for ws in listeners + agents:
            await ws.close()
    served = deployed.node.log_tail(2_000_000)
    assert "POST /v1/audio/transcriptions" in served and "POST /v1/audio/speech" in served


async def test_a_key_minted_on_one_replica_opens_one_session_on_the_other(deployed: Fleet) -> None:
    first, second = deployed.fronts.values()
    key = await asyncio.to_thread(mint, first)
    await (await connect(second.http, key=key)).close()
    for url in (first.http, second.http, deployed.url):  # spent in Redis, for every replica
        with pytest.raises(websockets.InvalidStatus) as refused:
            await connect(url, key=key)
        assert refused.value.response.status_code == 401


async def test_a_webrtc_call_is_reached_and_hung_up_on_its_replica_through_nginx(deployed: Fleet) -> None:
    pytest.importorskip("aiortc")
    from harness.webrtc_client import Caller

    callers = [Caller(deployed.url, API_KEY, validate=validate) for _ in REPLICAS]
    try:
        for caller in callers:
            assert (await caller.call()).status_code == 201
            await caller.until(lambda e: e["type"] == "session.created", 60)
        call_ids = [str(caller.location).rsplit("/", 1)[1] for caller in callers]
        assert sorted(call_id.split("_")[1] for call_id in call_ids) == sorted(REPLICAS), call_ids
        for call_id in call_ids * 2:  # round robin would send every other one to the wrong replica
            async with websockets.connect(
                f"{deployed.ws}/v1/realtime?call_id={call_id}",
                additional_headers={"Authorization": f"Bearer {API_KEY}"},
            ) as sideband:
                update = {
                    "type": "session.update",
                    "session": {"type": "realtime", "instructions": "Be brief."},
                }
                await sideband.send(json.dumps(update))
                assert (await until(sideband, "session.updated", 30))["session"][
                    "instructions"
                ] == "Be brief."
        for caller in callers:
            assert await caller.hang_up() == 204
            await caller.track_ended(30)
            assert await caller.hang_up() == 404, "the call is over on the replica that held it"
        for front in deployed.fronts.values():
            assert sessions(front, "agent") == 0
    finally:
        for caller in callers:
            await caller.close()


# -- one front-end stopped under load ------------------------------------------------------


@dataclass
class Speaker:
    """A transcription session through nginx that speaks clips at real time, the client
    committing each, until it has spoken its clips, is told to stop, or is closed by the server;
    it stays connected when done."""

    ws: ClientConnection
    #: The replica its session is on, read off the replicas' `/metrics` as it opened.
    replica: str
    #: The clip of each commit, in order, and the items the server committed, in order.
    sent: list[str] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    completed: dict[str, str] = field(default_factory=dict)
    #: `time.monotonic()` of each item's commit, and of the close.
    committed_at: dict[str, float] = field(default_factory=dict)
    closed_at: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None
    #: Set once a second of its first clip is out: it is mid-speech.
    speaking: asyncio.Event = field(default_factory=asyncio.Event)
    _news: asyncio.Event = field(default_factory=asyncio.Event)

    async def listen(self) -> None:
        try:
            while True:
                event = await next_event(self.ws, 300.0)
                self.events.append(event)
                if event["type"] == "input_audio_buffer.committed":
                    self.committed.append(event["item_id"])
                    self.committed_at[event["item_id"]] = time.monotonic()
                elif event["type"] == COMPLETED:
                    self.completed[event["item_id"]] = event["transcript"]
                self._news.set()
        except websockets.ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd is not None else None
            self.closed_at = time.monotonic()
        finally:
            self._news.set()

    async def wait(self, done: Callable[[Speaker], bool], limit: float = 180.0) -> None:
        """Until `done(self)` holds after an event, or `limit` seconds pass (a TimeoutError)."""
        async with asyncio.timeout(limit):
            while not done(self):
                if self.closed_at is not None:
                    raise AssertionError(f"closed ({self.close_code}) before that: {self.events[-3:]}")
                self._news.clear()
                await self._news.wait()

    async def speak(self, stop: asyncio.Event, clips: int | None = None) -> None:
        await self.ws.send(json.dumps({"type": "session.update", "session": PUSH_TO_TALK}))
        try:
            while not stop.is_set() and (clips is None or len(self.sent) < clips):
                clip = CLIPS[len(self.sent) % len(CLIPS)]
                audio = speech(clip)
                for at in range(0, len(audio), 2400):
                    piece = b64(audio[at : at + 2400])
                    await self.ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
                    if at >= 24_000:
                        self.speaking.set()
                    await asyncio.sleep(0.1)  # real time: 100 ms of audio each 100 ms
                self.sent.append(clip)
                await self.ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        except websockets.ConnectionClosed:
            pass

    def check_transcripts(self) -> None:
        """Every committed item has its transcript, and each is what its clip says."""
        missing = [item for item in self.committed if item not in self.completed]
        assert not missing, f"committed but never transcribed: {missing}; {[e['type'] for e in self.events]}"
        assert len(self.committed) == len(self.sent), (self.committed, self.sent)
        for item, clip in zip(self.committed, self.sent, strict=True):
            assert wer([reference(clip)], [self.completed[item]]) < 0.3, (clip, self.completed[item])


async def open_speaker(deployed: Fleet) -> Speaker:
    """A transcription session through nginx, and the replica it landed on."""
    before = {name: sessions(front, "transcription") or 0 for name, front in deployed.fronts.items()}
    ws = await connect(deployed.url)
    after = {name: sessions(front, "transcription") or 0 for name, front in deployed.fronts.items()}
    [replica] = [name for name in before if after[name] == before[name] + 1]
    return Speaker(ws, replica)


@dataclass
class Crowd:
    """Four speakers through nginx, two on each replica, all mid-speech."""

    speakers: list[Speaker]
    stop: asyncio.Event
    speaking: list[asyncio.Task[None]]

    def on(self, replica: str) -> list[Speaker]:
        return [s for s in self.speakers if s.replica == replica]

    async def check_they_go_on(self, survivors: list[Speaker], gone_at: float) -> None:
        """Each of `survivors` commits after `gone_at`; then all stop speaking, and every item a
        survivor committed has its transcript, with no error."""
        for speaker in survivors:
            await speaker.wait(lambda s: any(t > gone_at for t in s.committed_at.values()))
        self.stop.set()
        await asyncio.gather(*self.speaking)
        for speaker in survivors:
            await speaker.wait(lambda s: len(s.completed) == len(s.committed) == len(s.sent))
            speaker.check_transcripts()
            assert not [e for e in speaker.events if e["type"] == "error"], speaker.events


@contextlib.asynccontextmanager
async def crowd(deployed: Fleet, clips_on_a: int | None = None) -> AsyncIterator[Crowd]:
    """Four speakers through nginx, two on each replica, each past a second of its first clip;
    replica a's say `clips_on_a` clips (all, by default, talk on until stopped). All are closed
    when the block ends.

    nginx's round robin spreads connections, but four in a row need not split two and two: right
    after a replica was replaced it sent three of four to the other (a CI run of 2026-12-04), and
    a peer that refused a connection is skipped for `fail_timeout`. So sessions are opened until
    each replica holds two (at most eight tries), and any beyond that are closed at once."""
    speakers: list[Speaker] = []
    for _ in range(8):
        speaker = await open_speaker(deployed)
        if sum(s.replica == speaker.replica for s in speakers) < 2:
            speakers.append(speaker)
        else:
            await speaker.ws.close()
        if len(speakers) == 4:
            break
    assert sorted(s.replica for s in speakers) == ["a", "a", "b", "b"], "nginx spreads sessions"
    stop = asyncio.Event()
    listening = [asyncio.create_task(s.listen()) for s in speakers]
    speaking = [
        asyncio.create_task(s.speak(stop, clips_on_a if s.replica == "a" else None)) for s in speakers
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*(s.speaking.wait() for s in speakers)), 60)
        yield Crowd(speakers, stop, speaking)
    finally:
        stop.set()
        for speaker in speakers:
            await speaker.ws.close()
        await asyncio.gather(*listening, *speaking, return_exceptions=True)


async def test_a_front_end_stopped_under_load_loses_no_committed_item_and_spares_the_other(
    deployed: Fleet,
) -> None:
    stopped, kept = deployed.fronts["a"], deployed.fronts["b"]
    # Replica a's clients say two clips, the first begun before the SIGTERM and both committed
    # during the drain, then stay connected: the drain runs to its deadline. Replica b's talk on.
    async with crowd(deployed, clips_on_a=2) as speakers:
        draining, survivors = speakers.on("a"), speakers.on("b")
        term_at = time.monotonic()
        stopped.process.send_signal(signal.SIGTERM)
        exited = await asyncio.to_thread(stopped.process.wait, DRAIN_S + 60)
        gone_at = time.monotonic()
        assert exited == 0

        # Its clients: every item committed during the drain transcribed, then a clean close.
        for speaker in draining:
            await speaker.wait(lambda s: s.closed_at is not None, 30)
        for speaker in draining:
            assert speaker.close_code == 1001, speaker.close_code
            assert speaker.closed_at is not None and speaker.closed_at - term_at >= DRAIN_S - 1.0
            last = speaker.events[-1]
            assert last["type"] == "error" and last["error"]["code"] == "server_shutting_down", last
            assert len(speaker.committed) == 2, "both clips were committed during the drain"
            assert all(at > term_at for at in speaker.committed_at.values())
            speaker.check_transcripts()

        # The other replica's sessions never noticed: each goes on to commit and transcribe.
        assert all(s.close_code is None and s.closed_at is None for s in survivors)
        assert sessions(kept, "transcription") == 2
        await speakers.check_they_go_on(survivors, gone_at)

        # New sessions land on the replica that is left.
        newcomer = await connect(deployed.url)
        assert sessions(kept, "transcription") == 3
        assert wer([reference(CLIPS[0])], [await transcribe(newcomer)]) < 0.3
        await newcomer.close()


async def test_a_front_end_killed_outright_drops_only_its_own_sessions(deployed: Fleet) -> None:
    """A replica that dies without a drain (SIGKILL, as a crashed host): nothing can close its
    sessions cleanly, but its clients learn at once, through nginx, that the connection is gone,
    rather than hang; the other replica's sessions go on as if nothing happened."""
    assert deployed.fronts["a"].process.poll() is not None, "replica a was stopped above"
    replacement = await asyncio.to_thread(deployed.replace, "a")
    async with crowd(deployed) as speakers:
        killed, survivors = speakers.on("a"), speakers.on("b")
        replacement.process.kill()
        await asyncio.to_thread(replacement.process.wait, 30)
        gone_at = time.monotonic()
        for speaker in killed:
            await speaker.wait(lambda s: s.closed_at is not None, 30)
            # No close frame can come from a killed process: the connection just ends.
            assert speaker.close_code is None, speaker.close_code
            assert not [e for e in speaker.events if e["type"] == "error"], speaker.events

        assert all(s.closed_at is None for s in survivors)
        await speakers.check_they_go_on(survivors, gone_at)
