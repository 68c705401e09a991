"""The interpreter's speech: when the words committed since the last clause are spoken."""

from __future__ import annotations

from dragoman.sessions.translation.events import OutputAudioDelta
from dragoman.sessions.translation.speech_out import OUTPUT_RATE, STARVING_MS, SpokenOutput


def spoken(out: SpokenOutput, seconds: float, clock_ms: float) -> None:
    """The TTS lane speaks the next clause: `seconds` of audio, made at `clock_ms`."""
    job = out.next_job()
    assert job is not None
    out.chunk(job, b"\x01\x00" * int(OUTPUT_RATE * seconds), clock_ms)
    out.done(job, clock_ms)


def test_the_words_since_the_last_clause_are_spoken_when_the_listener_would_run_out() -> None:
    frames: list[OutputAudioDelta] = []
    out = SpokenOutput(frames.append)
    out.say("Allerdings hängen die Stile", "de-voice", "de", clock_ms=3000)
    spoken(out, 2.0, clock_ms=3200)  # the first clause, heard until 5200 ms
    assert frames[-1].elapsed_ms == 5000
    out.say(" im Westen aufgrund der langsamen", "de-voice", "de", clock_ms=5200 - STARVING_MS - 400)
    assert out.next_job() is None, "the listener has speech enough: wait for a mark"
    out.say(" Kommunikationskanäle", "de-voice", "de", clock_ms=5200 - STARVING_MS + 200)
    job = out.next_job()
    assert job is not None, "the listener would run out: speak what has come"
    assert job.request.text == "im Westen aufgrund der langsamen Kommunikationskanäle"


def test_a_voice_that_falls_silent_speaks_the_words_waiting_when_its_clause_ends() -> None:
    out = SpokenOutput(lambda frame: None)
    out.say("Allerdings hängen die Stile", "v", "de", clock_ms=3000)
    first = out.next_job()
    assert first is not None
    out.say(" im Westen aufgrund", "v", "de", clock_ms=3100)  # while the first clause is made
    assert out.next_job() is None, "one clause at a time"
    out.chunk(first, b"\x01\x00" * int(OUTPUT_RATE * 0.4), 3400)
    out.done(first, 3400)
    job = out.next_job()
    assert job is not None and job.request.text == "im Westen aufgrund"


def test_fewer_than_three_words_wait_for_more() -> None:
    out = SpokenOutput(lambda frame: None)
    out.say("Allerdings hängen die Stile", "v", "de", clock_ms=3000)
    spoken(out, 0.4, clock_ms=3200)
    out.say(" im", "v", "de", clock_ms=4000)
    assert out.next_job() is None
    out.end_utterance("v")
    job = out.next_job()
    assert job is not None and job.request.text == "im", "the utterance's end says the rest"
