"""A session that leaves the language open: the engine detects it, and only a detection on
enough speech, or a sure one on a little less, is kept, forced and sent
(`LANGUAGE_SETTLES_SECONDS`, `LANGUAGE_SURE_SECONDS`). No sockets, no models."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from dragoman.audio.pcm import float_to_pcm16
from dragoman.config import TranscriptionSettings
from dragoman.engines.asr.base import ASRCapabilities, PrefixMode, StepResult
from dragoman.protocol.realtime.client_parsers import ClientParser, Generation
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import (
    LANGUAGE_SETTLES_SECONDS,
    LANGUAGE_SURE_PROBABILITY,
    LANGUAGE_SURE_SECONDS,
)
from dragoman.sessions.speech.events import Delta
from dragoman.sessions.transcription.session import StepJob, TranscriptionSession
from tests.unit.fakes import WordTokenizer

RATE = 16_000


def make_session(languages: frozenset[str], **settings: Any) -> tuple[TranscriptionSession, ClientParser]:
    profile = EngineProfile(
        name="fake-asr",
        capabilities=ASRCapabilities(30.0, languages, PrefixMode.DECODER_PROMPT),
        tokenizer=WordTokenizer(),
        max_item_seconds=300.0,
    )
    config = SessionConfig.defaults(TranscriptionSettings(**settings), RATE)
    session = TranscriptionSession("sess_test", profile, config, None, None, partials=True)
    session.events_to_send()
    return session, ClientParser(Generation.BETA)


def append(session: TranscriptionSession, parser: ClientParser, seconds: float) -> None:
    t = np.arange(int(seconds * RATE)) / RATE
    audio = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    raw = {"type": "input_audio_buffer.append", "audio": base64.b64encode(float_to_pcm16(audio)).decode()}
    session.receive(parser.parse(json.dumps(raw)))


def step(
    session: TranscriptionSession, text: str, heard: str | None, sure: float | None = None
) -> tuple[StepJob, list[str]]:
    """Run the next step, heard as `text` in `heard` (with probability `sure`); the deltas it sent."""
    job = session.next_job()
    assert job is not None
    session.job_done(job, StepResult(text=text, language=heard, language_probability=sure))
    deltas = [e.delta for e in session.events_to_send() if isinstance(e, Delta)]
    return job, deltas


MULTILINGUAL = frozenset({"en", "de", "it", "zh"})


def test_a_language_heard_on_a_short_window_is_detected_again() -> None:
    """German heard as English on the first 2 s must not bind the item to English."""
    session, parser = make_session(MULTILINGUAL, unfixed_chunks=1)
    append(session, parser, 2.0)
    first, deltas = step(session, "and then we went home and ate our dinner", "en")
    assert first.request.language is None
    assert deltas == [], "nothing heard in an unsettled language is sent"
    append(session, parser, 2.0)
    second, deltas = step(session, "und dann gingen wir nach Hause und assen zu Abend", "de")
    assert second.request.language is None, "the short window's guess is not kept"
    assert second.request.prefix == "", "nor is its text forced"
    assert len(second.request.audio) >= LANGUAGE_SETTLES_SECONDS * RATE
    assert "".join(deltas).startswith("und dann")
    append(session, parser, 2.0)
    third, _ = step(session, "und dann gingen wir nach Hause und assen zu Abend mit", "en")
    assert third.request.language == "de", "a detection on enough speech is kept"
    assert third.request.prefix.startswith("und dann")


def test_the_default_chunks_send_nothing_later_than_before() -> None:
    """With unfixed_chunks=2 the second step is the first whose text goes out; it settles."""
    session, parser = make_session(MULTILINGUAL)
    append(session, parser, 2.0)
    _, deltas = step(session, "one two three", "en")
    assert deltas == []
    append(session, parser, 2.0)
    _, deltas = step(session, "one two three four five six seven", "en")
    assert "".join(deltas).strip().startswith("one two")


def test_a_language_the_client_names_is_never_detected() -> None:
    session, parser = make_session(MULTILINGUAL, unfixed_chunks=1)
    session.receive(
        parser.parse(
            json.dumps(
                {
                    "type": "transcription_session.update",
                    "session": {"input_audio_transcription": {"language": "it"}},
                }
            )
        )
    )
    session.events_to_send()
    append(session, parser, 2.0)
    first, deltas = step(session, "e poi siamo andati a casa e abbiamo cenato", "it")
    assert first.request.language == "it"
    assert "".join(deltas).strip().startswith("e poi")


def test_an_engine_of_one_language_or_that_does_not_say_settles_at_once() -> None:
    for languages, heard in ((frozenset({"en"}), "en"), (MULTILINGUAL, None)):
        session, parser = make_session(languages, unfixed_chunks=1)
        append(session, parser, 2.0)
        _, deltas = step(session, "one two three four five six seven", heard)
        assert "".join(deltas).strip().startswith("one two"), languages


def test_a_short_item_takes_the_language_its_final_step_hears() -> None:
    session, parser = make_session(MULTILINGUAL)
    append(session, parser, 2.0)
    step(session, "hallo", "en")
    append(session, parser, 0.5)
    session.receive(parser.parse(json.dumps({"type": "input_audio_buffer.commit"})))
    session.events_to_send()
    final, deltas = step(session, "hallo zusammen", "de")
    assert final.final and final.request.language is None
    assert "".join(deltas).strip() == "hallo zusammen"


def interpreter_cadence() -> tuple[TranscriptionSession, ClientParser]:
    """Steps of 0.8 s, text sent from the third (the interpreter's cadence)."""
    return make_session(MULTILINGUAL, chunk_seconds=0.8, unfixed_chunks=3)


def test_a_sure_detection_on_enough_speech_settles_before_the_usual_window() -> None:
    """At the interpreter's cadence the third step (2.4 s) is the first that may send text:
    a sure detection there sends it, rather than a step later than a fixed language would."""
    session, parser = interpreter_cadence()
    words = "we went home and then we ate our dinner together"
    for n in (1, 2):
        append(session, parser, 0.8)
        _, deltas = step(session, " ".join(words.split()[: 2 * n]), "en", sure=0.99)
        assert deltas == [], "a sure guess on a short window is not kept"
    append(session, parser, 0.8)
    third, deltas = step(session, words, "en", sure=LANGUAGE_SURE_PROBABILITY)
    assert len(third.request.audio) >= LANGUAGE_SURE_SECONDS * RATE
    assert len(third.request.audio) < LANGUAGE_SETTLES_SECONDS * RATE
    assert "".join(deltas).strip().startswith("we went home")
    append(session, parser, 0.8)
    fourth, _ = step(session, words + " at eight", "de", sure=0.9)
    assert fourth.request.language == "en", "the sure detection is kept"


def test_an_unsure_detection_waits_for_the_usual_window() -> None:
    session, parser = interpreter_cadence()
    words = "und dann gingen wir nach Hause und assen zu Abend"
    for _ in range(3):
        append(session, parser, 0.8)
        job, deltas = step(session, words, "en", sure=LANGUAGE_SURE_PROBABILITY - 0.05)
        assert deltas == [] and job.request.language is None
    append(session, parser, 0.8)
    fourth, deltas = step(session, words, "de", sure=0.5)
    assert fourth.request.language is None and len(fourth.request.audio) < LANGUAGE_SETTLES_SECONDS * RATE
    assert deltas == []
    append(session, parser, 0.8)
    fifth, deltas = step(session, words + " mit", "de", sure=0.5)
    assert len(fifth.request.audio) >= LANGUAGE_SETTLES_SECONDS * RATE
    assert "".join(deltas).strip().startswith("und dann")
