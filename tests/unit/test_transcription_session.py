"""The transcription session state machine, with no sockets and no models.

Events go in and out through the protocol, as the server sends them: raw JSON is
parsed into session events, and the session's events are written as wire dicts.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from dragoman.audio.pcm import float_to_pcm16
from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, PrefixMode, StepResult
from dragoman.errors import EngineFailure, RequestRejected
from dragoman.protocol.realtime.client_parsers import ClientParser, Generation, default_input_rate
from dragoman.protocol.realtime.server_events import wire_event
from dragoman.sessions.speech.config import EngineProfile
from dragoman.sessions.transcription.session import SessionConfig, StepJob, TranscriptionSession
from tests.unit.fakes import ByteTokenizer, EnergyVAD, WordTokenizer

RATE = 16_000


class WireSession:
    """A session behind the protocol: raw JSON in, wire dicts out, the rest passed through."""

    def __init__(self, session: TranscriptionSession, generation: Generation) -> None:
        self.session = session
        self.parser = ClientParser(generation)

    def receive(self, raw: str | bytes) -> None:
        self.session.receive(self.parser.parse(raw))

    def events_to_send(self) -> list[dict[str, Any]]:
        return [wire_event(e, self.parser.generation) for e in self.session.events_to_send()]

    def __getattr__(self, name: str) -> Any:
        # next_job, job_done, job_failed, config, revisions and the internals some tests look at.
        return getattr(self.session, name)


def make_session(
    generation: Generation = Generation.BETA,
    tokenizer: Any = None,
    max_item_seconds: float = 300.0,
    vad: bool = True,
    turn_model: Any = None,
    partials: bool = True,
    **settings: Any,
) -> WireSession:
    """A session behind the wire; `partials` as if the client asked for them (most tests read them)."""
    profile = EngineProfile(
        name="fake-asr",
        capabilities=ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT),
        tokenizer=tokenizer or WordTokenizer(),
        max_item_seconds=max_item_seconds,
    )
    config = SessionConfig.defaults(TranscriptionSettings(**settings), default_input_rate(generation))
    factory = (lambda: turn_model) if turn_model is not None else None
    session = TranscriptionSession(
        "sess_test", profile, config, EnergyVAD if vad else None, factory, partials=partials
    )
    return WireSession(session, generation)


def send(session: WireSession, type_: str, /, **body: Any) -> list[dict[str, Any]]:
    session.receive(json.dumps({"type": type_, **body}))
    return session.events_to_send()


def b64(audio: np.ndarray) -> str:
    return base64.b64encode(float_to_pcm16(audio)).decode()


def tone(seconds: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def silence(seconds: float, rate: int = RATE) -> np.ndarray:
    return np.zeros(int(seconds * rate), dtype=np.float32)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def run_step(session: WireSession, text: str) -> tuple[StepJob, list[dict[str, Any]]]:
    job = session.next_job()
    assert job is not None
    assert text.startswith(job.request.prefix), "the fake engine honours the forced prefix"
    session.job_done(job, StepResult(text=text, language="en"))
    return job, session.events_to_send()


# -- session events and updates ------------------------------------------------------


def test_beta_session_created_shape() -> None:
    session = make_session(partials=False)
    (event,) = session.events_to_send()
    assert event["type"] == "transcription_session.created"
    body = event["session"]
    assert body["input_audio_format"] == "pcm16"
    assert body["turn_detection"] is None
    assert body["mstar"] == {
        "chunk_seconds": 2.0,
        "unfixed_chunks": 2,
        "unfixed_tokens": 5,
        "max_item_seconds": 30.0,
        "partials": False,
    }


@pytest.mark.parametrize(
    "ask",
    [
        {"type": "transcription", "include": ["mstar.transcription.partial"]},
        {"type": "transcription", "mstar": {"partials": True}},
    ],
)
def test_partials_go_out_only_when_the_client_asks(ask: dict[str, Any]) -> None:
    """A strict client (pipecat's parser) refuses an event type OpenAI does not send."""
    session = make_session(Generation.GA, vad=False, partials=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.5, 24_000)))
    assert "mstar.transcription.partial" not in types(drain_steps(session, "one two three"))
    (updated,) = send(session, "session.update", session=ask)
    assert updated["session"]["mstar"]["partials"] is True
    send(session, "input_audio_buffer.append", audio=b64(tone(2.5, 24_000)))
    assert "mstar.transcription.partial" in types(drain_steps(session, "one two three four"))


def drain_steps(session: WireSession, text: str) -> list[dict[str, Any]]:
    """Run every step the session has now, each heard as `text`."""
    events: list[dict[str, Any]] = []
    while (job := session.session.next_job()) is not None:
        session.session.job_done(job, StepResult(text=text, language="en"))
        events += session.events_to_send()
    return events


def test_ga_session_defaults_to_24khz() -> None:
    session = make_session(Generation.GA)
    (event,) = session.events_to_send()
    assert event["type"] == "session.created"
    assert event["session"]["type"] == "transcription"
    assert event["session"]["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}


def test_ga_update_sets_audio_input() -> None:
    session = make_session()
    session.events_to_send()
    events = send(
        session,
        "session.update",
        session={
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": "whisper-1", "language": "en", "prompt": "names"},
                    "turn_detection": {"type": "server_vad", "silence_duration_ms": 700},
                }
            },
        },
    )
    assert types(events) == ["session.updated"]
    audio_in = events[0]["session"]["audio"]["input"]
    # Honest: whisper-1 was asked for, fake-asr serves it.
    assert audio_in["transcription"] == {"model": "fake-asr", "language": "en", "prompt": "names"}
    assert audio_in["turn_detection"]["silence_duration_ms"] == 700
    assert audio_in["turn_detection"]["threshold"] == 0.5
    assert session.config.input_rate == 24000


def test_numeric_strings_count_as_numbers() -> None:
    session = make_session()
    session.events_to_send()
    events = send(
        session,
        "transcription_session.update",
        session={"mstar": {"chunk_seconds": "1.5", "unfixed_chunks": "3", "unfixed_tokens": 4.0}},
    )
    assert types(events) == ["transcription_session.updated"]
    assert (session.config.chunk_seconds, session.config.unfixed_chunks, session.config.unfixed_tokens) == (
        1.5,
        3,
        4,
    )


def test_chunk_seconds_is_raised_to_the_minimum() -> None:
    session = make_session()
    send(session, "transcription_session.update", session={"mstar": {"chunk_seconds": 0.01}})
    assert session.config.chunk_seconds == 0.5


@pytest.mark.parametrize(
    ("mstar_or_session", "param"),
    [
        ({"mstar": {"chunk_seconds": 31}}, "session.mstar.chunk_seconds"),
        ({"mstar": {"chunk_seconds": "fast"}}, "session.mstar.chunk_seconds"),
        ({"mstar": {"unfixed_tokens": -1}}, "session.mstar.unfixed_tokens"),
        ({"mstar": {"unfixed_tokens": 2.5}}, "session.mstar.unfixed_tokens"),
        ({"mstar": {"unfixed_chunks": True}}, "session.mstar.unfixed_chunks"),
        ({"mstar": {"unfixed_chunks": "nan"}}, "session.mstar.unfixed_chunks"),
        ({"input_audio_transcription": {"language": 12}}, "session.input_audio_transcription.language"),
        ({"input_audio_transcription": {"language": "x" * 33}}, "session.input_audio_transcription.language"),
        ({"input_audio_transcription": {"prompt": ["a"]}}, "session.input_audio_transcription.prompt"),
        ({"input_audio_format": "g711_ulaw"}, "session.input_audio_format"),
        ({"input_audio_format": {"type": "audio/pcm", "rate": 12345}}, "session.input_audio_format"),
        ({"turn_detection": {"type": "push_to_talk"}}, "session.turn_detection.type"),
        (
            {"turn_detection": {"type": "semantic_vad", "eagerness": "max"}},
            "session.turn_detection.eagerness",
        ),
        # This session has no turn model.
        ({"turn_detection": {"type": "semantic_vad"}}, "session.turn_detection.type"),
        ({"turn_detection": {"type": "server_vad", "threshold": 2}}, "session.turn_detection.threshold"),
    ],
)
def test_invalid_values_are_errors_and_change_nothing(mstar_or_session: dict[str, Any], param: str) -> None:
    session = make_session()
    session.events_to_send()
    before = session.config
    # A valid field next to the invalid one must not be applied either: all or nothing.
    body = {"input_audio_transcription": {"language": "en"}, **mstar_or_session}
    if "input_audio_transcription" in mstar_or_session:
        body["mstar"] = {"unfixed_tokens": 9}
    events = send(session, "transcription_session.update", event_id="evt_1", session=body)
    assert types(events) == ["error"]
    error = events[0]["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["event_id"] == "evt_1"
    assert session.config == before


def test_language_and_prompt_may_be_null() -> None:
    session = make_session()
    send(session, "transcription_session.update", session={"input_audio_transcription": {"language": "en"}})
    events = send(
        session, "transcription_session.update", session={"input_audio_transcription": {"language": None}}
    )
    assert types(events) == ["transcription_session.updated"]
    assert session.config.language is None


def test_unknown_event_and_bad_json_are_errors() -> None:
    session = make_session()
    session.events_to_send()
    assert send(session, "response.create")[0]["error"]["code"] == "invalid_event"
    session.receive("{not json")
    (event,) = session.events_to_send()
    assert event["type"] == "error" and "JSON" in event["error"]["message"]


def test_binary_frames_are_refused_and_a_broken_envelope_quotes_no_event_id() -> None:
    session = make_session()
    session.events_to_send()
    session.receive(b"\x00\x01")
    (event,) = session.events_to_send()
    assert event["error"]["code"] == "invalid_event" and "binary" in event["error"]["message"]
    session.receive(json.dumps({"event_id": "evt_9"}))
    (event,) = session.events_to_send()
    assert event["error"]["param"] == "type" and event["error"]["event_id"] is None
    events = send(session, "input_audio_buffer.append", event_id="evt_10")
    assert events[0]["error"]["param"] == "audio" and events[0]["error"]["event_id"] == "evt_10"


# -- audio input ------------------------------------------------------------------


def test_odd_byte_is_carried_into_the_next_append() -> None:
    audio = tone(0.3)
    pcm = float_to_pcm16(audio)
    whole = make_session(vad=False)
    whole.receive(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}))
    split = make_session(vad=False)
    for start, end in [(0, 1001), (1001, 2003), (2003, len(pcm))]:
        piece = base64.b64encode(pcm[start:end]).decode()
        split.receive(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
    assert types(split.events_to_send()) == ["transcription_session.created"]
    assert np.array_equal(whole.front.current_item.audio(), split.front.current_item.audio())


def test_malformed_base64_is_an_error_not_silence() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    events = send(session, "input_audio_buffer.append", audio="AAA*")
    assert events[0]["error"]["code"] == "invalid_audio"
    assert session.front.current_item is None or session.front.current_item.samples == 0


def test_rate_changes_only_with_an_empty_buffer() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(0.2)))
    events = send(
        session, "transcription_session.update", session={"input_audio_format": {"type": "audio/pcm"}}
    )
    assert events[0]["error"]["param"] == "session.input_audio_format"
    assert session.config.input_rate == 16000
    send(session, "input_audio_buffer.commit")
    events = send(
        session, "transcription_session.update", session={"input_audio_format": {"type": "audio/pcm"}}
    )
    assert types(events) == ["transcription_session.updated"]
    assert session.config.input_rate == 24000


def test_24khz_input_is_resampled_and_keeps_the_client_timeline() -> None:
    session = make_session(Generation.GA, vad=False)
    session.events_to_send()
    for _ in range(10):  # 2.5 s at 24 kHz in 250 ms appends
        send(session, "input_audio_buffer.append", audio=b64(tone(0.25, 24_000)))
    job = session.next_job()
    assert job is not None
    # The chunk is due on the append that completes it, though the resampler holds a little back.
    assert job.clock == 40_000
    assert 0 <= 40_000 - len(job.request.audio) < 800  # soxr HQ holds back well under 50 ms


def test_append_past_the_cap_is_refused_without_vad() -> None:
    session = make_session(vad=False, max_item_seconds=3.0)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.5)))
    events = send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    assert events[0]["error"]["code"] == "input_audio_buffer_too_long"
    assert session.front.current_item is not None and session.front.current_item.samples == 40_000
    send(session, "input_audio_buffer.commit")
    assert session.next_job() is not None


def test_commit_of_an_empty_buffer_is_an_error() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    assert send(session, "input_audio_buffer.commit")[0]["error"]["code"] == "input_audio_buffer_commit_empty"


# -- the re-decode algorithm ----------------------------------------------------------


def test_a_step_is_due_every_chunk_and_long_appends_are_one_step() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(1.5)))
    assert session.next_job() is None
    send(session, "input_audio_buffer.append", audio=b64(tone(5.0)))  # completes three chunks
    job = session.next_job()
    assert job is not None and len(job.request.audio) == 104_000
    assert session.next_job() is None, "one step in flight per session"
    # Audio arriving during the step is coalesced into the next one.
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    session.job_done(job, StepResult(" one two", "en"))
    nxt = session.next_job()
    assert nxt is not None and len(nxt.request.audio) == 136_000


def test_prefix_is_forced_once_unfixed_chunks_are_in() -> None:
    session = make_session(vad=False, unfixed_chunks=2, unfixed_tokens=2)
    session.events_to_send()
    hypotheses = [" the cat", " the cat sat on", " the cat sat on the mat", " the cat sat on the mat today"]
    prefixes = []
    for text in hypotheses:
        send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
        job, _ = run_step(session, text)
        prefixes.append(job.request.prefix)
    # Steps 1 and 2 run free; step 3 forces step 2's text minus 2 tokens, and so on.
    assert prefixes == ["", "", " the cat", " the cat sat on"]


def test_deltas_are_append_only_and_hold_the_unstable_tail() -> None:
    session = make_session(vad=False, unfixed_chunks=1, unfixed_tokens=1)
    session.events_to_send()
    sent = ""
    partials = []
    for text in [" I scream", " I scream you", " I scream you scream", " I scream you scream we"]:
        send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
        _, events = run_step(session, text)
        sent += "".join(e["delta"] for e in events if e["type"].endswith("transcription.delta"))
        partials += [e for e in events if e["type"] == "mstar.transcription.partial"]
        # Everything sent is a prefix of the hypothesis; the last token is held back.
        assert text.strip().startswith(sent)
        assert len(sent) <= len(text.strip()) - len(text.split()[-1])
    assert partials[-1]["text"] == "I scream you scream we"
    assert partials[-1]["stable_chars"] == len("I scream you scream")
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    send(session, "input_audio_buffer.commit")
    _, events = run_step(session, " I scream you scream we all scream")
    sent += "".join(e["delta"] for e in events if e["type"].endswith("transcription.delta"))
    completed = events[-1]
    assert completed["type"] == "conversation.item.input_audio_transcription.completed"
    assert completed["transcript"] == sent == "I scream you scream we all scream"
    assert completed["usage"] == {"type": "duration", "seconds": 9.0}
    assert session.revisions == 0


def test_a_step_that_adds_little_keeps_the_sent_text_forced() -> None:
    """A pause adds fewer words than unfixed_tokens: the stable prefix of the step's text is
    then shorter than what was forced and sent, and must not stop being forced."""
    session = make_session(vad=False, unfixed_chunks=1, unfixed_tokens=3)
    session.events_to_send()
    sent = ""
    prefixes = []
    for text in [" a b c d e f", " a b c d", " a b c d e f g h i"]:
        send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
        job, events = run_step(session, text)
        prefixes.append(job.request.prefix)
        sent += "".join(e["delta"] for e in events if e["type"].endswith("transcription.delta"))
    # The second step added one word; the third is still forced to what the first sent.
    assert prefixes == ["", " a b c", " a b c"]
    assert sent == "a b c d e f"
    assert session.revisions == 0


def test_no_delta_before_the_prefix_is_forced() -> None:
    session = make_session(vad=False, unfixed_chunks=2, unfixed_tokens=1)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    _, events = run_step(session, " hello there world")
    assert types(events) == ["mstar.transcription.partial"]


def test_a_revision_into_sent_text_is_counted_not_resent() -> None:
    session = make_session(vad=False, unfixed_chunks=0, unfixed_tokens=0)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    _, events = run_step(session, " word")
    send(session, "input_audio_buffer.append", audio=b64(tone(0.5)))
    send(session, "input_audio_buffer.commit")
    job = session.next_job()
    assert job is not None
    # An engine that ignores the forced prefix revises sent text.
    session.job_done(job, StepResult(" world is", "en"))
    events = session.events_to_send()
    # The sent "word" stands for "world"; only what follows it is appended (never "wordld is").
    deltas = [e["delta"] for e in events if e["type"] == "conversation.item.input_audio_transcription.delta"]
    assert deltas == [" is"]
    assert events[-1]["transcript"] == "world is"
    assert session.revisions == 1


def test_multibyte_prefix_never_forces_a_broken_character() -> None:
    session = make_session(vad=False, tokenizer=ByteTokenizer(), unfixed_chunks=1, unfixed_tokens=2)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    run_step(session, "你好世界")
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    job = session.next_job()
    assert job is not None and job.request.prefix == "你好世"


def test_clear_drops_the_item_and_a_result_in_flight() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    job = session.next_job()
    assert job is not None
    assert types(send(session, "input_audio_buffer.clear")) == ["input_audio_buffer.cleared"]
    session.job_done(job, StepResult(" gone", "en"))
    assert session.events_to_send() == []
    assert session.next_job() is None


def test_commit_decodes_the_rest_with_item_ids_chained() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    ids = []
    for _ in range(2):
        send(session, "input_audio_buffer.append", audio=b64(tone(0.7)))
        (committed,) = send(session, "input_audio_buffer.commit")
        assert committed["type"] == "input_audio_buffer.committed"
        ids.append((committed["item_id"], committed["previous_item_id"]))
        job, events = run_step(session, " short")
        assert job.final and events[-1]["transcript"] == "short"
    assert ids[0][1] is None and ids[1][1] == ids[0][0]


def test_step_errors_quote_client_faults_and_hide_server_faults() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    job = session.next_job()
    assert job is not None
    session.job_failed(job, RequestRejected("Language 'xx' is not supported by /srv/models/whisper"))
    (event,) = session.events_to_send()
    assert event["error"]["type"] == "invalid_request_error"
    assert event["error"]["message"] == "Language 'xx' is not supported by whisper"
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    job = session.next_job()
    assert job is not None
    failure = EngineFailure("CUDA exploded in /opt/secret/path.py")
    session.job_failed(job, failure)
    (event,) = session.events_to_send()
    assert event["error"]["type"] == "server_error"
    assert failure.error_id in event["error"]["message"]
    assert "secret" not in json.dumps(event) and "CUDA" not in json.dumps(event)
    # The session survives both.
    send(session, "input_audio_buffer.commit")
    _, events = run_step(session, " still here")
    assert events[-1]["transcript"] == "still here"


# -- server VAD ---------------------------------------------------------------------


def test_server_vad_ends_turns_with_timeline_events() -> None:
    session = make_session(vad=True)
    session.events_to_send()
    vad = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 200, "silence_duration_ms": 400}
    send(session, "transcription_session.update", session={"turn_detection": vad})
    audio = np.concatenate([silence(1.0), tone(1.0), silence(1.0), tone(0.5), silence(1.0)])
    events = send(session, "input_audio_buffer.append", audio=b64(audio))
    kinds = [t for t in types(events) if t.startswith("input_audio_buffer")]
    assert (
        kinds
        == [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
        ]
        * 2
    )
    starts = [e["audio_start_ms"] for e in events if e["type"].endswith("speech_started")]
    stops = [e["audio_end_ms"] for e in events if e["type"].endswith("speech_stopped")]
    assert abs(starts[0] - 800) <= 40 and abs(starts[1] - 2800) <= 40
    assert abs(stops[0] - 2400) <= 40 and abs(stops[1] - 3900) <= 40
    # Each committed item is finished by its own final step.
    job, events = run_step(session, " first")
    assert job.final and events[-1]["transcript"] == "first"
    job, events = run_step(session, " second")
    assert job.final and events[-1]["transcript"] == "second"


def test_semantic_vad_ends_a_complete_turn_at_its_pause() -> None:
    heard: list[int] = []

    def turn_model(audio: np.ndarray) -> float:
        heard.append(len(audio))
        return 0.9 if len(heard) > 1 else 0.1  # the first pause is judged incomplete

    session = make_session(vad=True, turn_model=turn_model)
    session.events_to_send()
    semantic = {"type": "semantic_vad", "eagerness": "high"}
    events = send(session, "transcription_session.update", session={"turn_detection": semantic})
    assert events[-1]["session"]["turn_detection"] == semantic
    # Speech, a 0.6 s pause (high: P 0.1 waits about 1.5 s), more speech, then a long silence.
    audio = np.concatenate([silence(1.0), tone(1.0), silence(0.6), tone(0.5), silence(3.0)])
    events = send(session, "input_audio_buffer.append", audio=b64(audio))
    kinds = [t for t in types(events) if t.startswith("input_audio_buffer")]
    assert kinds == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
    ]
    (started,) = [e for e in events if e["type"].endswith("speech_started")]
    (stopped,) = [e for e in events if e["type"].endswith("speech_stopped")]
    assert abs(started["audio_start_ms"] - 700) <= 40
    # The second pause is judged complete: the turn ends about 200 ms into it, not at a timeout.
    assert 3100 + 200 <= stopped["audio_end_ms"] <= 3100 + 300
    assert len(heard) == 2
    job, events = run_step(session, " one turn")
    assert job.final and events[-1]["transcript"] == "one turn"


def test_a_commit_takes_speech_held_short_of_the_gate() -> None:
    session = make_session(vad=True)
    session.events_to_send()
    send(session, "transcription_session.update", session={"turn_detection": {"type": "server_vad"}})
    # 0.2 s of speech: less than min_speech_ms, so no turn has started yet.
    assert "input_audio_buffer.speech_started" not in types(
        send(session, "input_audio_buffer.append", audio=b64(np.concatenate([silence(0.5), tone(0.2)])))
    )
    events = send(session, "input_audio_buffer.commit")
    assert types(events) == ["input_audio_buffer.speech_started", "input_audio_buffer.committed"]
    job = session.next_job()
    # From 300 ms before the first speech window (the 16th) to the last whole window (the 21st).
    assert job is not None and job.final and len(job.request.audio) == 21 * 512 - (15 * 512 - 4800)


def test_a_turn_reaching_the_cap_is_committed_there() -> None:
    session = make_session(vad=True, max_item_seconds=2.0)
    session.events_to_send()
    send(session, "transcription_session.update", session={"turn_detection": {"type": "server_vad"}})
    events = send(session, "input_audio_buffer.append", audio=b64(np.concatenate([tone(3.0), silence(1.0)])))
    assert "error" not in types(events)
    committed = [e for e in events if e["type"] == "input_audio_buffer.committed"]
    assert len(committed) == 2
    job = session.next_job()
    assert job is not None and job.final and len(job.request.audio) == 32_000


def test_commit_on_a_chunk_boundary_reuses_the_last_step() -> None:
    session = make_session(vad=False, unfixed_chunks=0, unfixed_tokens=1)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    run_step(session, " all decoded")
    send(session, "input_audio_buffer.commit")
    # No new audio since the step: the item completes without decoding it again.
    assert session.next_job() is None
    events = session.events_to_send()
    completed = events[-1]
    assert completed["type"] == "conversation.item.input_audio_transcription.completed"
    assert completed["transcript"] == "all decoded"
    deltas = "".join(e["delta"] for e in events if e["type"].endswith("transcription.delta"))
    assert deltas == " decoded"


def test_partial_reports_the_audio_its_step_covered() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    job = session.next_job()
    assert job is not None
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))  # arrives during the step
    session.job_done(job, StepResult(" hello", "en"))
    (partial,) = [e for e in session.events_to_send() if e["type"] == "mstar.transcription.partial"]
    assert partial["audio_seconds"] == 2.0


def test_audio_faster_than_it_can_be_transcribed_is_refused_not_queued() -> None:
    from dragoman.sessions.speech.front import MAX_PENDING_ITEMS

    session = make_session(vad=False)
    session.events_to_send()
    for _ in range(MAX_PENDING_ITEMS):
        send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
        send(session, "input_audio_buffer.commit")
    (error,) = send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    assert error["type"] == "error" and error["error"]["code"] == "input_audio_buffer_backlog"
    # Once the engine catches up, audio is taken again.
    job, _ = run_step(session, "one")
    assert job.final
    assert send(session, "input_audio_buffer.append", audio=b64(tone(1.0))) == []


def test_audio_the_driver_refuses_is_answered_and_not_taken() -> None:
    session = make_session(vad=False)
    session.events_to_send()
    send(session, "input_audio_buffer.append", audio=b64(tone(1.0)))
    taken = session.input_seconds
    session.refuse_audio(True)
    (error,) = send(session, "input_audio_buffer.append", audio=b64(tone(2.0)))
    assert error["type"] == "error" and error["error"]["code"] == "input_audio_buffer_backlog"
    assert "faster than real time" in error["error"]["message"]
    assert session.input_seconds == taken, "nothing of the refused append was taken"
    session.refuse_audio(False)
    assert send(session, "input_audio_buffer.append", audio=b64(tone(1.0))) == []
    assert session.input_seconds == pytest.approx(taken + 1.0)
