"""The interpreter's speech: when the words committed since the last clause are spoken."""

from __future__ import annotations

from dragoman.sessions.translation.events import OutputAudioDelta
from dragoman.sessions.translation.speech_out import (
    CATCH_UP_FROM_MS,
    CATCH_UP_FULL_MS,
    MAX_CATCH_UP,
    OUTPUT_RATE,
    STARVING_MS,
    SpokenOutput,
    catch_up_speed,
)


def spoken(out: SpokenOutput, seconds: float, clock_ms: float) -> None:
    """The TTS lane speaks the next clause: `seconds` of audio, made at `clock_ms`."""
    job = out.next_job(clock_ms)
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
    assert out.next_job(5200 - STARVING_MS - 400) is None, "the listener has speech enough: wait for a mark"
    out.say(" Kommunikationskanäle", "de-voice", "de", clock_ms=5200 - STARVING_MS + 200)
    job = out.next_job(5200 - STARVING_MS + 200)
    assert job is not None, "the listener would run out: speak what has come"
    assert job.request.text == "im Westen aufgrund der langsamen Kommunikationskanäle"


def test_a_voice_that_falls_silent_speaks_the_words_waiting_when_its_clause_ends() -> None:
    out = SpokenOutput(lambda frame: None)
    out.say("Allerdings hängen die Stile", "v", "de", clock_ms=3000)
    first = out.next_job(3000)
    assert first is not None
    out.say(" im Westen aufgrund", "v", "de", clock_ms=3100)  # while the first clause is made
    assert out.next_job(3100) is None, "one clause at a time"
    out.chunk(first, b"\x01\x00" * int(OUTPUT_RATE * 0.4), 3400)
    out.done(first, 3400)
    job = out.next_job(3400)
    assert job is not None and job.request.text == "im Westen aufgrund"


def test_fewer_than_three_words_wait_for_more() -> None:
    out = SpokenOutput(lambda frame: None)
    out.say("Allerdings hängen die Stile", "v", "de", clock_ms=3000)
    spoken(out, 0.4, clock_ms=3200)
    out.say(" im", "v", "de", clock_ms=4000)
    assert out.next_job(4000) is None
    out.end_utterance("v", 4000)
    job = out.next_job(4000)
    assert job is not None and job.request.text == "im", "the utterance's end says the rest"


def test_a_clause_heard_late_after_its_text_is_spoken_faster() -> None:
    middle = (CATCH_UP_FROM_MS + CATCH_UP_FULL_MS) // 2
    lateness = (-800, 0, CATCH_UP_FROM_MS, middle, CATCH_UP_FULL_MS, 30_000)
    assert [catch_up_speed(ms) for ms in lateness] == [1.0, 1.0, 1.0, 1.15, MAX_CATCH_UP, MAX_CATCH_UP]
    out = SpokenOutput(lambda frame: None)
    out.say("Allerdings hängen die Stile im Westen, ", "v", "de", clock_ms=3000)
    first = out.next_job(3400)
    assert first is not None and first.request.speed == 1.0, "heard as its text came"
    heard_until = 4600 + middle  # on the 200 ms grid
    out.chunk(first, b"\x01\x00" * (OUTPUT_RATE * (heard_until - 3600) // 1000), 3600)
    out.done(first, 4000)
    out.say("aufgrund der langsamen Kommunikationskanäle, ", "v", "de", clock_ms=4600)
    second = out.next_job(4600)
    assert second is not None and second.request.speed == 1.15, "heard long after its text came"
    out.say("um 25 bis 30 Jahre zurück.", "v", "de", clock_ms=5000)
    # The voice is slow: its first audio comes at 11 s, the next clause's text came at 5 s.
    out.chunk(second, b"\x01\x00" * OUTPUT_RATE, 11_000)  # heard 11-12 s
    out.done(second, 11_200)
    third = out.next_job(11_200)
    assert third is not None and third.request.speed == MAX_CATCH_UP, "waited 7 s for the voice"
    out.done(third, 11_400)
    out.say("Die Nomen", "v", "de", clock_ms=15_000)
    out.end_utterance("v", 15_000)
    fourth = out.next_job(15_000)
    assert fourth is not None and fourth.request.speed == 1.0, "caught up again"


def test_while_the_speaker_talks_a_clause_is_judged_by_when_its_end_is_heard() -> None:
    """A long clause begun as its text came still ends late if more speech is coming: its length
    counts, at the pace the voice has spoken so far."""
    out = SpokenOutput(lambda frame: None)
    out.say("Allerdings hängen die Stile, ", "v", "de", clock_ms=1000)  # 27 characters
    first = out.next_job(1000, talking=True)
    assert first is not None
    out.chunk(first, b"\x01\x00" * (OUTPUT_RATE * 27 // 15), 1000)  # 15 characters a second
    out.done(first, 1200)
    long = "aufgrund der langsamen Kommunikationskanäle im Westen und in den Kolonien bis zu 30 Jahre zurück."
    out.say(" " + long, "v", "de", clock_ms=2800)  # heard from 2800 ms, over 6 s long
    talking = out.next_job(2800, talking=True)
    assert talking is not None and talking.request.speed == MAX_CATCH_UP
    # A clause that failed (no audio) says nothing of the pace: the default one is taken.
    failed = SpokenOutput(lambda frame: None)
    failed.say("Allerdings hängen die Stile, ", "v", "de", clock_ms=1000)
    nothing = failed.next_job(1000, talking=True)
    assert nothing is not None
    failed.done(nothing, 1200)
    failed.say(" " + long, "v", "de", clock_ms=2800)
    paced = failed.next_job(2800, talking=True)
    assert paced is not None and paced.request.speed == MAX_CATCH_UP
    # The same clause when the speaker has stopped: heard as its text came, at the voice's pace.
    quiet = SpokenOutput(lambda frame: None)
    quiet.say(long, "v", "de", clock_ms=2800)
    alone = quiet.next_job(2800, talking=False)
    assert alone is not None and alone.request.speed == 1.0
