"""The soak's interpreter client: what arrives is placed in the right recording's window."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from bench.soak_connection import append
from bench.soak_interpreter import APPEND, FRAME_S, RATE, InterpreterSession
from bench.soak_recorder import Recorder, Schedule, Tally


def session() -> InterpreterSession:
    rec = Recorder(Schedule(begin=0.0, seconds=60.0, abuse=False))
    return InterpreterSession(rec, Tally("interpreter"))


def delta(kind: str, text: str, elapsed_ms: int) -> dict[str, object]:
    return {"type": f"session.{kind}.delta", "delta": text, "elapsed_ms": elapsed_ms}


def test_text_goes_to_the_recording_being_spoken_and_its_lags_are_recorded() -> None:
    state = session()
    first = state.begin(10.0)
    state.handle(12.0, delta("input_transcript", "Hello there", 2000))
    state.handle(13.0, delta("output_transcript", "Hallo", 3000))
    first.speech_end = 14.0
    state.handle(15.5, delta("output_transcript", " zusammen.", 5400))
    second = state.begin(20.0)
    state.handle(21.0, delta("input_transcript", " And you?", 11000))
    second.speech_end = 22.0
    state.handle(24.0, delta("output_transcript", " Und du?", 14000))

    assert state.settle() == []
    assert (first.text, second.text) == ("Hallo zusammen.", " Und du?")
    assert (state.tally.sent, state.tally.accepted, state.tally.answered, state.tally.lost) == (2, 2, 2, 0)
    lags = {(s.kind, s.at): s.seconds for s in state.rec.latencies}
    assert lags == {
        ("interpreter first text", 10.0): 3.0,
        ("interpreter end lag", 10.0): 1.5,
        ("interpreter first text", 20.0): 4.0,
        ("interpreter end lag", 20.0): 2.0,
    }


def test_a_recording_heard_but_never_translated_is_lost() -> None:
    state = session()
    state.begin(0.0)
    state.handle(1.0, delta("input_transcript", "Hello", 1000))
    state.handle(1.5, delta("output_transcript", " ", 1400))  # a joining space is not a translation
    state.begin(5.0)  # silence only: neither heard nor translated, so not lost

    lost = state.settle()

    assert len(lost) == 1 and "recording 0" in lost[0]
    assert (state.tally.sent, state.tally.accepted, state.tally.answered, state.tally.lost) == (2, 1, 0, 1)


def test_a_translation_that_comes_after_the_next_recording_began_is_the_earlier_ones() -> None:
    state = session()
    first = state.begin(0.0)
    state.handle(2.0, delta("input_transcript", "Six times ten", 2000))
    first.speech_end = 4.0
    second = state.begin(9.0)  # a load past the pause: nothing translated yet
    state.handle(9.5, delta("output_transcript", "Sechs mal zehn.", 9400))
    state.handle(11.0, delta("input_transcript", " is sixty.", 11000))
    state.handle(14.0, delta("output_transcript", " Ist sechzig.", 14000))

    assert state.settle() == []
    assert (first.text, second.text) == ("Sechs mal zehn.", " Ist sechzig.")
    assert {(s.kind, s.at): s.seconds for s in state.rec.latencies}[("interpreter end lag", 0.0)] == 5.5


def test_each_kind_of_delta_keeps_its_own_clock() -> None:
    state = session()
    state.begin(0.0)
    audio = base64.b64encode(np.zeros(int(RATE * FRAME_S), "<i2").tobytes()).decode()
    # The translated speech runs ahead of the text on its own timeline: not a step back.
    state.handle(
        1.0, {"type": "session.output_audio.delta", "delta": audio, "elapsed_ms": 4000, "sample_rate": RATE}
    )
    state.handle(1.1, delta("output_transcript", "Hallo", 2000))
    state.handle(1.2, delta("output_transcript", " du", 1800))

    assert dict(state.clock_went_back) == {"session.output_transcript.delta": 1}
    assert state.audio_out_s == pytest.approx(FRAME_S)


def test_the_appends_are_the_translation_sessions_own_event_of_pcm16() -> None:
    event = json.loads(append(np.full(int(RATE * FRAME_S), 0.5, np.float32), APPEND))

    assert event["type"] == "session.input_audio_buffer.append"
    pcm = np.frombuffer(base64.b64decode(event["audio"]), "<i2")
    assert len(pcm) == int(RATE * FRAME_S) and pcm[0] == 16384
