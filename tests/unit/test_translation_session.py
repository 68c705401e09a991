"""The translation session (OpenAI's Realtime translation) as a sans-I/O state machine: client
frames in through the protocol, server events out as the SDK's types read them, and its
engine jobs run by hand on fakes: an ASR that hears a scripted sentence as the audio
grows, the lexicon MT engine, and a TTS that says any clause in 300 ms of audio."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import numpy as np
import pytest
from openai.types.realtime import RealtimeTranslationServerEvent
from pydantic import TypeAdapter

from dragoman.audio.pcm import float_to_pcm16
from dragoman.engines.asr.base import ASRCapabilities, PrefixMode, StepResult
from dragoman.engines.asr.whisper_ct2 import likeliest
from dragoman.engines.mt.base import MTDraft, MTRequest
from dragoman.errors import EngineFailure, InvalidValue
from dragoman.protocol.realtime.translation_client import TranslationParser
from dragoman.protocol.realtime.translation_server import translation_wire
from dragoman.sessions.agent.jobs import ASR, TTS
from dragoman.sessions.base import CloseCode
from dragoman.sessions.mt.events import MTJob
from dragoman.sessions.speech.config import EngineProfile, SessionConfig
from dragoman.sessions.speech.decoder import StepJob
from dragoman.sessions.translation.config import ASR_SCOPE, Languages, TranslationConfig, interpreter_speech
from dragoman.sessions.translation.session import (
    END_LAG_SECONDS,
    FIRST_TEXT_SECONDS,
    INPUT_SECONDS,
    MT,
    OUTPUT_SECONDS,
    TranslationSession,
)
from dragoman.sessions.translation.speech_out import SpeakJob
from dragoman.sessions.translation.timeline import MILESTONES
from dragoman.sessions.translation.translator import MTProfile, split_transcript
from dragoman.streaming.alignatt import AlignAttParams
from dragoman.streaming.turns import ServerVADConfig
from harness.mt_fakes import FakeEngine
from tests.unit.fakes import EnergyVAD, WordTokenizer

RATE = 24_000
SCRIPT = "Hello world, how are you? the big house is red."
#: 200 ms of PCM16 at 24 kHz.
FRAME_BYTES = 9600
SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(RealtimeTranslationServerEvent)
VOICES = {"de": "espeak-de", "it": "espeak-it", "zh": "espeak-zh", "en": "hibari"}


def voice_for(language: str) -> str:
    if language not in VOICES:
        raise InvalidValue(f"no voice speaks {language!r}")
    return VOICES[language]


class Harness:
    """A session behind the protocol, with fake engines for its three lanes."""

    def __init__(
        self,
        language: str = "de",
        transcription: str | None = "whisper",
        media_track: bool = False,
        clock: Callable[[], float] = lambda: 1_999_996_400.0,
        source: str = "en",
        directions: tuple[str, ...] = ("en-de", "en-it", "en-zh"),
        max_utterance_words: int = 60,
        **speech: Any,
    ) -> None:
        self.mt = FakeEngine(directions)
        #: The language the fake ASR says it heard.
        self.heard_language: str | None = "en"
        profile = EngineProfile(
            name="fake-asr",
            capabilities=ASRCapabilities(30.0, frozenset({"en"}), PrefixMode.DECODER_PROMPT),
            tokenizer=WordTokenizer(),
            max_item_seconds=300.0,
        )
        config = SessionConfig(
            input_rate=RATE,
            turn_detection=ServerVADConfig(),
            language=None if source == "auto" else source,
            **({"chunk_seconds": 0.5} | speech),
        )
        self.session = TranslationSession(
            "sess_test",
            model="gpt-realtime-translate",
            model_names=frozenset({"dragoman-interpreter"}),
            expires_at=2_000_000_000,
            config=TranslationConfig(language, transcription),
            languages=Languages.of(self.mt.directions(), source),
            asr=profile,
            speech=config,
            mt=MTProfile(
                engine_name=self.mt.name,
                directions=tuple(self.mt.directions()),
                decode=self.mt.decode,
                default_preset="test",
                presets={"test": AlignAttParams()},
                max_utterance_words=max_utterance_words,
            ),
            voices=voice_for,
            vad_factory=EnergyVAD,
            media_track=media_track,
            clock=clock,
        )
        self.parser = TranslationParser()
        self.events: list[dict[str, Any]] = []
        self.spoken: list[SpeakJob] = []
        self.steps: list[StepJob] = []
        self.asr_text: Callable[[StepJob], str] = heard
        #: The events sent while an MT draft was still being drafted.
        self.during_drafts: list[dict[str, Any]] = []

    def send(self, type_: str, /, **body: Any) -> list[dict[str, Any]]:
        self.session.receive(self.parser.parse(json.dumps({"type": type_, **body})))
        return self.drain()

    def drain(self) -> list[dict[str, Any]]:
        new = [translation_wire(e) for e in self.session.events_to_send()]
        for event in new:
            SERVER_EVENT.validate_python(json.loads(json.dumps(event)))  # as a client reads it
        self.events += new
        return new

    def append(self, audio: np.ndarray, chunk_s: float = 0.2) -> None:
        step = int(chunk_s * RATE)
        for start in range(0, len(audio), step):
            self.send("session.input_audio_buffer.append", audio=b64(audio[start : start + step]))

    def run(self, lanes: tuple[str, ...] = (ASR, MT, TTS)) -> None:
        """Run the jobs of `lanes` until none is left."""
        busy = True
        while busy:
            busy = False
            for lane in lanes:
                job = self.session.next_job(lane)
                self.drain()
                if job is None:
                    continue
                busy = True
                if isinstance(job, StepJob):
                    self.steps.append(job)
                    result = StepResult(text=self.asr_text(job), language=self.heard_language)
                    self.session.job_done(job, result)
                elif isinstance(job, MTJob):
                    self.session.job_done(job, self.mt.draft(self._streamed(job)))
                else:
                    assert isinstance(job, SpeakJob)
                    self.spoken.append(job)
                    self.session.job_progress(job, b"\x01\x00" * int(0.3 * job.request.rate))
                    self.session.job_done(job, None)
                self.drain()

    def _streamed(self, job: MTJob) -> MTRequest:
        """The job's request as the driver hands a streaming one to the engine: each pass's
        draft goes to the session (`job_progress`) while the engine drafts on."""
        if not job.streaming:
            return job.request

        def on_pass(draft: MTDraft) -> None:
            self.session.job_progress(job, draft)
            self.during_drafts += self.drain()

        return replace(job.request, on_pass=on_pass)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def text(self, kind: str) -> str:
        return "".join(e["delta"] for e in self.of(kind))


def heard(job: StepJob) -> str:
    """The scripted sentence, a word per 0.25 s of audio heard (all of it in 2.75 s)."""
    words = SCRIPT.split()
    n = min(len(words), int(len(job.request.audio) / 16_000 * 4))
    text = " ".join(words[:n])
    assert text.startswith(job.request.prefix.strip()), "the fake ASR honours the forced prefix"
    return text


def b64(audio: np.ndarray) -> str:
    return base64.b64encode(float_to_pcm16(audio)).decode()


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


def speak_segment(h: Harness, seconds: float = 3.0) -> None:
    """A phrase, with the engines keeping up as it is spoken, then the pause that ends it."""
    for _ in range(int(seconds / 0.5)):
        h.append(tone(0.5))
        h.run()
    h.append(silence(1.0))
    h.run()


# -- the session and its updates ----------------------------------------------------------


def test_session_created_first_with_the_session_object() -> None:
    h = Harness()
    (created,) = h.drain()
    assert created["type"] == "session.created"
    session = created["session"]
    assert session["id"].startswith("sess_") and session["type"] == "translation"
    assert session["model"] == "gpt-realtime-translate" and session["expires_at"] == 2_000_000_000
    assert session["audio"]["output"] == {"language": "de"}
    assert session["audio"]["input"]["transcription"] == {"model": "fake-asr"}


def test_update_changes_language_transcription_and_noise_reduction() -> None:
    h = Harness(transcription=None)
    h.drain()
    (updated,) = h.send(
        "session.update",
        session={
            "audio": {
                "output": {"language": "it-IT"},
                "input": {
                    "transcription": {"model": "gpt-4o-transcribe"},
                    "noise_reduction": {"type": "far_field"},
                },
            }
        },
    )
    assert updated["type"] == "session.updated"
    audio = updated["session"]["audio"]
    assert audio["output"] == {"language": "it"}
    assert audio["input"]["noise_reduction"] == {"type": "far_field", "strength": 1.0}
    assert audio["input"]["transcription"] == {"model": "fake-asr"}
    # A strength left out keeps the current one; null turns it off.
    h.send(
        "session.update",
        session={"audio": {"input": {"noise_reduction": {"type": "near_field", "strength": 0.4}}}},
    )
    (again,) = h.send(
        "session.update", session={"audio": {"input": {"noise_reduction": {"type": "far_field"}}}}
    )
    assert again["session"]["audio"]["input"]["noise_reduction"] == {"type": "far_field", "strength": 0.4}
    (off,) = h.send(
        "session.update", session={"audio": {"input": {"noise_reduction": None, "transcription": None}}}
    )
    assert off["session"]["audio"]["input"] == {"transcription": None, "noise_reduction": None}


def hum(seconds: float, seed: int = 3) -> np.ndarray:
    """Steady noise loud enough (RMS 0.08) for the energy VAD to take it for speech."""
    return (0.08 * np.random.default_rng(seed).standard_normal(int(seconds * RATE))).astype(np.float32)


def test_noise_reduction_filters_the_audio_before_the_vad_and_the_model() -> None:
    """Configured noise reduction is applied to the input, not only shown: steady noise the VAD
    would take for speech (and the fake ASR would hear words in) is cut below it, while a phrase
    spoken over the noise is still heard and translated. Turned off again, the noise is heard."""

    def phrase(h: Harness, audio: np.ndarray) -> None:
        for start in range(0, len(audio), RATE // 2):
            h.append(audio[start : start + RATE // 2])
            h.run()
        h.append(silence(1.0))
        h.run()

    plain = Harness()
    phrase(plain, hum(3.0))
    assert plain.mt.requests, "without noise reduction, the noise is 'heard'"

    h = Harness()
    h.send("session.update", session={"audio": {"input": {"noise_reduction": {"type": "near_field"}}}})
    phrase(h, hum(3.0))
    assert not h.mt.requests and not h.of("session.output_transcript.delta"), "the noise is cut"
    phrase(h, tone(3.0) + hum(3.0, seed=4))
    assert h.text("session.output_transcript.delta").startswith("Hallo Welt"), "speech over it is heard"
    done = len(h.mt.requests)
    h.send("session.update", session={"audio": {"input": {"noise_reduction": None}}})
    phrase(h, hum(3.0, seed=6))
    assert len(h.mt.requests) > done, "with noise reduction off, the noise is heard again"


def test_unknown_language_is_refused_with_the_supported_ones() -> None:
    h = Harness()
    h.drain()
    (error,) = h.send("session.update", event_id="ev1", session={"audio": {"output": {"language": "fr"}}})
    assert error["type"] == "error"
    assert error["error"]["code"] == "unsupported_language"
    assert error["error"]["param"] == "session.audio.output.language"
    assert error["error"]["event_id"] == "ev1"
    assert "de, it, zh" in error["error"]["message"]
    assert h.session.config.language == "de"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"audio": {"input": {"format": {"type": "audio/pcmu"}}}}, "session.audio.input.format"),
        (
            {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}},
            "session.audio.input.format",
        ),
        ({"audio": {"input": {"noise_reduction": {"type": "studio"}}}}, None),
        ({"audio": {"input": {"noise_reduction": {"type": "near_field", "strength": 3}}}}, None),
        ({"type": "realtime"}, "session.type"),
        ({"model": "gpt-4o-realtime"}, "session.model"),
    ],
)
def test_bad_updates_are_errors_and_change_nothing(body: dict[str, Any], param: str | None) -> None:
    h = Harness()
    h.drain()
    (error,) = h.send("session.update", session=body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    if param is not None:
        assert error["error"]["param"] == param
    assert h.session.config == TranslationConfig("de", "whisper")


def test_wrong_audio_is_an_error() -> None:
    h = Harness()
    h.drain()
    (error,) = h.send("session.input_audio_buffer.append", audio="not base64!")
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    (error,) = h.send("input_audio_buffer.append", audio=b64(tone(0.2)))
    assert (
        error["error"]["param"] == "type" and "session.input_audio_buffer.append" in error["error"]["message"]
    )


# -- the pipeline ---------------------------------------------------------------------------


def test_speech_in_translated_text_and_speech_out() -> None:
    h = Harness()
    speak_segment(h)
    assert h.text("session.input_transcript.delta") == SCRIPT
    # The lexicon MT: word for word, unknown words upper-cased.
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? die große Haus ist rot."
    audio = h.of("session.output_audio.delta")
    assert audio and all(len(base64.b64decode(e["delta"])) == FRAME_BYTES for e in audio)
    assert all(e["sample_rate"] == RATE and e["channels"] == 1 and e["format"] == "pcm16" for e in audio)
    # Clause by clause, each by the target language's voice, the translation's words in order.
    assert [job.request.voice for job in h.spoken] == ["espeak-de"] * len(h.spoken)
    assert (
        " ".join(job.request.text for job in h.spoken) == "Hallo Welt, wie geht es? die große Haus ist rot."
    )
    assert len(h.spoken) >= 2


def test_the_translations_words_go_out_while_mt_drafts_them() -> None:
    h = Harness()
    speak_segment(h)
    early = [e for e in h.during_drafts if e["type"] == "session.output_transcript.delta"]
    assert early and all(e in h.of("session.output_transcript.delta") for e in early)
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? die große Haus ist rot."


def test_translation_streams_while_the_speaker_talks() -> None:
    """The tail is fed to MT, and text is committed before the segment ends."""
    h = Harness()
    for _ in range(4):
        h.append(tone(0.5))
        h.run()
    assert h.text("session.output_transcript.delta"), "text before the phrase ended"
    assert h.mt.requests and all(r.mode.value == "partial" for r in h.mt.requests), "no final yet"
    assert not h.of("session.closed")


def test_elapsed_ms_on_the_input_clock_in_200_ms_steps_and_audio_never_overlaps() -> None:
    h = Harness()
    speak_segment(h)
    speak_segment(h)
    stamped = [e for e in h.events if "elapsed_ms" in e]
    assert stamped and all(e["elapsed_ms"] % 200 == 0 for e in stamped)
    texts = [e["elapsed_ms"] for e in h.of("session.output_transcript.delta")]
    assert texts == sorted(texts) and texts[-1] <= h.session.clock_ms
    frames = [e["elapsed_ms"] for e in h.of("session.output_audio.delta")]
    assert frames == sorted(frames) and len(set(frames)) == len(frames), "one frame per 200 ms slot"
    # Two segments: the output transcript joins them with a space.
    out = h.text("session.output_transcript.delta")
    assert out.count("Hallo Welt") == 2 and "rot. Hallo" in out


def test_no_source_transcript_without_transcription() -> None:
    h = Harness(transcription=None)
    speak_segment(h)
    assert h.of("session.output_transcript.delta")
    assert not h.of("session.input_transcript.delta")


def test_language_switch_mid_speech_applies_from_the_next_segment() -> None:
    h = Harness()
    h.append(tone(0.6))  # speech has begun; no transcript yet
    assert not h.mt.requests
    (updated,) = h.send("session.update", session={"audio": {"output": {"language": "it"}}})
    assert updated["session"]["audio"]["output"]["language"] == "it"
    h.append(tone(1.0))
    h.append(silence(1.0))
    h.run()
    assert {r.target_lang for r in h.mt.requests} == {"de"}, "the open segment stays German"
    assert {job.request.voice for job in h.spoken} == {"espeak-de"}
    first = len(h.mt.requests)
    speak_segment(h)
    assert {r.target_lang for r in h.mt.requests[first:]} == {"it"}
    assert h.spoken[-1].request.voice == "espeak-it"


# -- closing --------------------------------------------------------------------------------


def test_close_flushes_the_input_says_the_rest_then_closed() -> None:
    h = Harness()
    h.append(tone(3.0))  # no pause: the segment is still open
    h.run()
    h.send("session.close")
    assert h.session.close_code is None, "not before the rest is said"
    h.run()
    assert h.events[-1]["type"] == "session.closed"
    assert h.session.close_code == CloseCode.NORMAL
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? die große Haus ist rot."
    spoken = " ".join(job.request.text for job in h.spoken)
    assert spoken == h.text("session.output_transcript.delta")


def test_close_of_a_silent_session_closes_at_once() -> None:
    h = Harness()
    h.append(silence(1.0))
    (closed,) = h.send("session.close")
    assert closed["type"] == "session.closed" and h.session.close_code == CloseCode.NORMAL


def test_appends_after_close_are_errors() -> None:
    h = Harness()
    h.append(tone(1.0))
    h.send("session.close")
    (error,) = h.send("session.input_audio_buffer.append", event_id="late", audio=b64(tone(0.2)))
    assert error["error"]["code"] == "session_closed" and error["error"]["event_id"] == "late"
    (error,) = h.send("session.close")
    assert error["error"]["code"] == "session_closed"


def test_a_call_tracks_audio_after_close_is_dropped_and_the_close_completes() -> None:
    h = Harness(media_track=True)
    h.append(tone(3.0))
    h.run()
    h.send("session.close")
    # A WebRTC call's track runs on after the close: its audio is neither refused nor heard.
    assert h.send("session.input_audio_buffer.append", audio=b64(tone(1.0))) == []
    h.run()
    assert not h.of("error") and h.events[-1]["type"] == "session.closed"
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? die große Haus ist rot."


def test_the_session_ends_at_its_expires_at() -> None:
    """`expires_at` (60 minutes after the start) is enforced: past it the session sends OpenAI's
    `session_expired` error and closes, whatever it was doing; nothing more is heard or said."""
    now = [1_999_996_400.0]
    h = Harness(clock=lambda: now[0])
    h.append(tone(1.0))
    h.run()
    assert h.session.close_code is None
    now[0] = 2_000_000_000.0
    (error,) = h.send("session.input_audio_buffer.append", audio=b64(tone(0.2)))
    assert error["error"]["code"] == "session_expired"
    assert "60 minutes" in error["error"]["message"]
    assert h.session.close_code == CloseCode.NORMAL
    assert h.send("session.input_audio_buffer.append", audio=b64(tone(0.2))) == []
    assert all(h.session.next_job(lane) is None for lane in (ASR, MT, TTS))


def test_a_session_expires_while_its_jobs_run() -> None:
    """Expiry is also seen when the engines ask for work, not only when the client sends."""
    now = [1_999_996_400.0]
    h = Harness(clock=lambda: now[0])
    h.append(tone(1.0))
    now[0] = 2_000_000_001.0
    assert h.session.next_job(ASR) is None
    (error,) = h.drain()
    assert error["error"]["code"] == "session_expired" and h.session.close_code == CloseCode.NORMAL


# -- faults ---------------------------------------------------------------------------------


def test_a_failed_clause_is_skipped_and_reported() -> None:
    h = Harness()
    speak_segment(h, seconds=1.0)
    h.spoken.clear()
    for _ in range(4):
        h.append(tone(0.5))
        h.run((ASR, MT))
    h.append(silence(1.0))
    h.run((ASR, MT))
    job = h.session.next_job(TTS)
    assert isinstance(job, SpeakJob)
    h.session.job_failed(job, EngineFailure("tts broke"))
    (error,) = h.drain()
    assert error["type"] == "error" and error["error"]["type"] == "server_error"
    assert "tts broke" not in json.dumps(error)
    h.run()
    assert h.spoken, "the later clauses are still said"


def test_a_failed_draft_is_reported_and_the_session_goes_on() -> None:
    h = Harness()
    for _ in range(3):  # steps enough for committed source words, which MT drafts on
        h.append(tone(1.0))
        h.run((ASR,))
    job = h.session.next_job(MT)
    assert isinstance(job, MTJob)
    h.session.job_failed(job, EngineFailure("boom"))
    errors = [e for e in h.drain() if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["error"]["type"] == "server_error"
    h.append(silence(1.0))
    h.run()
    assert h.text("session.output_transcript.delta").endswith("rot.")


@pytest.mark.parametrize(
    ("text", "stable", "words", "tail"),
    [
        ("Hello world how", 8, ("Hello",), ("world", "how")),
        ("Hello world how", 11, ("Hello", "world"), ("how",)),
        ("Hello world how", 12, ("Hello", "world"), ("how",)),
        ("Hello world how", 15, ("Hello", "world", "how"), ()),
        ("Hello world", 0, (), ("Hello", "world")),
        ("Hello world", 3, (), ("Hello", "world")),
        # Chinese: one character a word, as the speech front cuts them.
        ("我们现在", 2, ("我", "们"), ("现", "在")),
        ("有 4 个月。", 6, ("有", "4", "个", "月"), ("。",)),
    ],
)
def test_split_transcript_commits_whole_words_only(
    text: str, stable: int, words: tuple[str, ...], tail: tuple[str, ...]
) -> None:
    assert split_transcript(text, stable) == (words, tail)


def test_observations_for_the_metrics() -> None:
    """Audio in and out, and each segment's lags on the input clock, for the driver to record."""
    h = Harness()
    speak_segment(h)
    seen: dict[str, list[float]] = {}
    for observation in h.session.take_observations():
        seen.setdefault(observation.metric, []).append(observation.value)
    assert sum(seen[INPUT_SECONDS]) == pytest.approx(h.session.clock_ms / 1000)
    assert sum(seen[OUTPUT_SECONDS]) == pytest.approx(0.3 * len(h.spoken))
    (first,) = seen[FIRST_TEXT_SECONDS]
    (end,) = seen[END_LAG_SECONDS]
    assert 0 < first < h.session.clock_ms / 1000 and 0 <= end < 1.5
    assert h.session.take_observations() == []


def test_a_server_whose_speakers_speak_german_translates_into_english() -> None:
    """The reverse directions: a server with `interpreter.source_language = "de"` serves the
    targets of the directions from German, and refuses the rest with the list."""
    languages = Languages.of(["en-de", "en-zh", "de-en", "zh-en"], source="de")
    assert languages.targets == ("en",)
    assert languages.check("en-US") == "en"
    with pytest.raises(InvalidValue, match="de speech into en") as refused:
        languages.check("zh")
    assert refused.value.code == "unsupported_language"


# -- the source language, per segment ("auto") ----------------------------------------------

BOTH_WAYS = ("en-de", "de-en", "en-it")


def test_a_server_for_every_source_language_serves_both_sides_of_a_conversation() -> None:
    """`interpreter.source_language = "auto"`: each segment's language is the one the speech
    model detects, so an English speaker's session into German and a German speaker's session
    into English run on one server, each on its own direction."""
    english = Harness(source="auto", directions=BOTH_WAYS)
    speak_segment(english)
    assert english.steps[0].request.language is None, "the first step detects the language"
    assert {r.source_lang for r in english.mt.requests} == {"en"}
    assert {r.target_lang for r in english.mt.requests} == {"de"}
    assert english.text("session.output_transcript.delta").startswith("Hallo Welt")

    german = Harness(language="en", source="auto", directions=BOTH_WAYS)
    german.heard_language = "de"
    speak_segment(german)
    assert {(r.source_lang, r.target_lang) for r in german.mt.requests} == {("de", "en")}
    assert german.of("session.output_transcript.delta") and not german.of("error")
    assert {job.request.voice for job in german.spoken} == {"hibari"}


def test_the_language_is_detected_among_the_sources_the_server_translates() -> None:
    """Whisper's guess is taken among the languages a direction starts from: a short English
    phrase it ranks as Dutch first is still English."""
    h = Harness(source="auto", directions=BOTH_WAYS, detect_among=("de", "en"))
    speak_segment(h)
    assert all(job.request.detect_among == ("de", "en") for job in h.steps)
    ranking = [("<|nl|>", 0.5), ("<|en|>", 0.3), ("<|de|>", 0.2)]
    assert likeliest(ranking, ("de", "en")) == ("en", 0.3)
    assert likeliest(ranking, ()) == ("nl", 0.5) and likeliest(ranking, ("fr",)) == ("nl", 0.5)


def test_speech_already_in_the_target_language_is_passed_through() -> None:
    h = Harness(language="en", source="auto", directions=BOTH_WAYS)
    speak_segment(h)
    assert not h.mt.requests and not h.of("error")
    assert h.text("session.output_transcript.delta") == SCRIPT
    assert " ".join(job.request.text for job in h.spoken) == SCRIPT


def test_speech_in_a_language_not_translated_is_a_clear_error_and_the_session_goes_on() -> None:
    h = Harness(language="de", source="auto", directions=BOTH_WAYS)
    h.heard_language = "fr"
    speak_segment(h)
    errors = h.of("error")
    assert len(errors) == 1, "one error for the segment, not one per step"
    assert errors[0]["error"]["code"] == "unsupported_language"
    assert "'fr'" in errors[0]["error"]["message"] and "en speech into de" in errors[0]["error"]["message"]
    assert not h.mt.requests and not h.of("session.output_transcript.delta")
    h.heard_language = "en"
    speak_segment(h)
    assert h.text("session.output_transcript.delta").startswith("Hallo Welt"), "the next segment is heard"


def test_chinese_source_text_of_two_segments_joins_without_a_space() -> None:
    h = Harness(language="en", source="auto", directions=("zh-en", "en-de"))
    h.heard_language = "zh"
    h.asr_text = lambda job: "你好世界"
    speak_segment(h)
    h.asr_text = lambda job: "谢谢"
    speak_segment(h)
    source = h.text("session.input_transcript.delta")
    assert source == "你好世界谢谢", source
    # The same two segments in English are joined by a space.
    english = Harness(language="de")
    english.asr_text = lambda job: "Hello world"
    speak_segment(english)
    english.asr_text = lambda job: "thanks"
    speak_segment(english)
    assert english.text("session.input_transcript.delta") == "Hello world thanks"


def test_a_segment_waits_for_the_language_to_be_heard() -> None:
    """An engine that does not say which language it heard: partials wait, and the final that
    still does not say is refused with the reason, not guessed."""
    h = Harness(language="de", source="auto", directions=BOTH_WAYS)
    h.heard_language = None
    speak_segment(h)
    assert not h.mt.requests
    (error,) = h.of("error")
    assert error["error"]["code"] == "unsupported_language"
    assert "unknown language" in error["error"]["message"]


def test_the_languages_of_a_server_for_every_source_language() -> None:
    languages = Languages.of(["en-de", "de-en", "en-it", "zh-en"], source="auto")
    assert languages.targets == ("de", "en", "it") and languages.sources == ("de", "en", "zh")
    with pytest.raises(InvalidValue, match="de, en, zh speech into de, en, it"):
        languages.check("fr")
    assert languages.heard("zh-CN", "en") == "zh" and languages.heard("en", "en") == "en"
    with pytest.raises(InvalidValue, match="en speech into it"):
        languages.heard("de", "it")
    # A server of one source language takes every segment as that language.
    assert Languages.of(["en-de", "de-en"], source="en").heard("de", "de") == "en"


# -- latency: the interpreter's cadence and where the first text waits ---------------------


def speak_growing(h: Harness, seconds: float) -> None:
    """Speech at real-time pace, 200 ms an append, the engines keeping up after each."""
    for _ in range(round(seconds / 0.2)):
        h.append(tone(0.2))
        h.run()


def interpreter_harness(**overrides: Any) -> Harness:
    """A session at the interpreter's cadence (`interpreter_speech`), one unfixed token."""
    cadence = interpreter_speech(SessionConfig())
    fields = ("chunk_seconds", "unfixed_chunks", "agree_early", "asr_scope")
    return Harness(**({f: getattr(cadence, f) for f in fields} | {"unfixed_tokens": 1} | overrides))


def test_the_interpreter_steps_every_0_8_s_and_commits_the_words_two_steps_agree_on() -> None:
    """`interpreter_speech`: a partial transcript 0.8 s of audio into the segment (transcription's
    default waits 2 s), and source words committed to MT once two steps agree on them: at the
    second step, 1.6 s in."""
    cadence = interpreter_speech(SessionConfig())
    assert (cadence.chunk_seconds, cadence.unfixed_chunks, cadence.agree_early) == (0.8, 3, True)
    h = interpreter_harness()
    speak_growing(h, 1.6)  # the segment opens ~0.2 s into the speech (the VAD's onset)
    assert len(h.steps) == 1, "a step every 0.8 s of the segment's audio"
    # ... each taking the interpreter's own ASR routes (`interpreter.asr_routes`).
    assert {job.request.scope for job in h.steps} == {ASR_SCOPE}
    assert not h.mt.requests, "one step's words alone are not committed"
    speak_growing(h, 0.2)
    assert len(h.steps) == 2
    (request,) = h.mt.requests
    # "Hello world, how" then "Hello world, how are you? the": "how" may have been cut off
    # in the shorter decode, so the words both said whole are "Hello world,".
    assert request.accessible_words == 2
    (marks,) = h.session.timeline.segments.values()
    assert 800 <= marks["partial"] - marks["speech"] < 1400
    assert 1600 <= marks["words"] - marks["speech"] < 2200
    assert h.text("session.input_transcript.delta") == "Hello world,"
    assert h.text("session.output_transcript.delta"), "translated text once words are committed"


def test_steps_that_disagree_commit_no_source_word_before_the_third() -> None:
    """A phrase's start misheard by the shorter decode ("All nails" for "All nouns") is not
    committed: without agreement the words wait for the third step's stable prefix."""
    h = interpreter_harness()
    said = iter(["Oh nails are", "All nouns alongside the", "All nouns alongside the word Sie"])
    h.asr_text = lambda job: next(said)
    speak_growing(h, 1.8)
    assert len(h.steps) == 2 and not h.mt.requests
    assert not h.text("session.input_transcript.delta")
    speak_growing(h, 0.8)
    assert len(h.steps) == 3
    assert h.steps[-1].request.prefix == "", "nothing was forced on the third step"
    assert h.mt.requests and h.text("session.input_transcript.delta").startswith("All nouns")


def test_the_timeline_marks_where_a_segments_first_text_waited() -> None:
    h = Harness()
    speak_segment(h)
    (row,) = cast("list[dict[str, int]]", h.session.timeline.summary()["segments"])
    assert set(row) == set(MILESTONES) - {"speech"}, "each milestone after the speech began"
    assert 0 < row["partial"] <= row["words"] <= row["text"] <= row["final"]
    assert row["mt_job"] <= row["text"]
    assert row["speech_end"] <= row["committed"] <= row["transcribed"] <= row["final"]
    summary = h.session.timeline.summary()
    assert summary["mt_jobs"] == len(h.mt.requests) and summary["mt_staleness_ms"] == 0
    # The counters the closing log line carries: MT's drafts of the segment, and the ASR's.
    stats = h.session.stats
    assert stats["drafts"] == len(h.mt.requests) and stats["asr_steps_coalesced"] == 0


def test_a_partial_that_changes_only_the_tail_is_not_drafted() -> None:
    """MT drafts only when the committed source words change: AlignAtt commits nothing against
    the tail, so a draft over a new tail alone would be thrown away by the next update."""
    h = Harness()
    translator = h.session.translator
    translator.begin("item_a")
    translator.partial("item_a", "Hello world", 0, 100.0)
    assert translator.next_job() is None, "a tail alone"
    translator.partial("item_a", "Hello world how", 6, 200.0)
    job = translator.next_job()
    assert job is not None and job.request.source_words == ("Hello", "world", "how")
    translator.job_done(job, h.mt.draft(job.request))
    translator.partial("item_a", "Hello world how are you", 6, 300.0)
    assert translator.next_job() is None, "the same committed word, a longer tail"
    translator.partial("item_a", "Hello world how are you", 12, 400.0)
    job = translator.next_job()
    assert job is not None and job.request.accessible_words == 2
    translator.job_done(job, h.mt.draft(job.request))
    translator.final("item_a", "Hello world how are you", 500.0)
    job = translator.next_job()
    assert job is not None and job.kind.value == "final", "the final is always translated"


def _forced_final_under_way(h: Harness) -> MTJob:
    """Segment a passes `max_utterance_words` (3): MT's forced final for its utterance is drafted,
    and a's own final transcript goes out meanwhile. Returns the forced final's job."""
    translator = h.session.translator
    translator.begin("item_a")
    translator.partial("item_a", "Hello world, how are you?", 25, 100.0)
    forced = translator.next_job()
    assert forced is not None and forced.kind.value == "forced_final"
    translator.final("item_a", "Hello world, how are you? the big house", 200.0)
    return forced


def test_a_segment_that_ends_while_mt_force_closes_its_utterance_is_translated_in_full() -> None:
    """MT closes an utterance past `max_utterance_words` with a forced final; when the segment's
    own final transcript went out while that draft ran, its last words go into the next
    utterance, and the session still closes: the stale final is answered, not awaited."""
    h = Harness(max_utterance_words=3)
    translator = h.session.translator
    forced = _forced_final_under_way(h)
    translator.job_done(forced, h.mt.draft(forced.request))
    while (job := translator.next_job()) is not None:
        translator.job_done(job, h.mt.draft(job.request))
    assert translator.idle, "every final answered"
    h.drain()
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? die große Haus"
    h.send("session.close")
    h.run()
    assert h.events[-1]["type"] == "session.closed"


def test_a_segment_that_starts_before_a_forced_final_is_answered_costs_the_last_one_no_words() -> None:
    """As above, and the next segment is heard before MT answers: it waits for an utterance id
    until the last segment's words have gone on in the next one, so neither loses a word and
    the translations come in the order they were spoken."""
    h = Harness(max_utterance_words=3)
    translator = h.session.translator
    forced = _forced_final_under_way(h)
    translator.begin("item_b")
    translator.partial("item_b", "the house is red.", 9, 300.0)
    translator.job_done(forced, h.mt.draft(forced.request))
    translator.final("item_b", "the house is red.", 400.0)
    while (job := translator.next_job()) is not None:
        translator.job_done(job, h.mt.draft(job.request))
    assert translator.idle, "every final answered"
    h.drain()
    assert (
        h.text("session.output_transcript.delta")
        == "Hallo Welt, wie geht es? die große Haus die Haus ist rot."
    )


COUNTED = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
]


def _force_twice(h: Harness) -> MTJob:
    """Segment a runs past `max_utterance_words` (3) twice: MT force-closes its first five words
    and then the next five; returns the second forced final's job, not yet answered."""
    translator = h.session.translator
    translator.begin("item_a")
    for n in (5, 10):
        text = " ".join(COUNTED[:n])
        translator.partial("item_a", text, len(text), 100.0 * n)
        job = translator.next_job()
        while job is not None and job.kind.value == "prefill":
            translator.job_done(job, h.mt.draft(job.request))
            job = translator.next_job()
        assert job is not None and job.kind.value == "forced_final"
        assert list(job.request.source_words) == COUNTED[n - 5 : n], "each utterance takes new words only"
        if n == 10:
            return job
        translator.job_done(job, h.mt.draft(job.request))
    raise AssertionError("unreachable")


def _answer_all(h: Harness) -> None:
    translator = h.session.translator
    while (job := translator.next_job()) is not None:
        translator.job_done(job, h.mt.draft(job.request))
    assert translator.idle, "every final answered"
    h.drain()


def test_a_segment_forced_closed_again_and_again_translates_each_word_once() -> None:
    """Each forced final takes the segment's words after the last one's: the third utterance
    once carried the first two's words and MT, which drops only the last forced run, translated
    them again ("ONE ... TEN ONE ... FOURTEEN")."""
    h = Harness(max_utterance_words=3)
    translator = h.session.translator
    second = _force_twice(h)
    translator.job_done(second, h.mt.draft(second.request))
    text = " ".join(COUNTED)
    translator.partial("item_a", text, len(text), 1400.0)
    translator.final("item_a", text, 1500.0)
    _answer_all(h)
    assert h.text("session.output_transcript.delta") == " ".join(COUNTED).upper()


def test_a_segment_that_ends_while_its_second_forced_final_is_drafted_loses_no_word() -> None:
    h = Harness(max_utterance_words=3)
    translator = h.session.translator
    second = _force_twice(h)
    translator.final("item_a", " ".join(COUNTED[:12]), 1200.0)  # its final, before MT answers
    translator.job_done(second, h.mt.draft(second.request))
    _answer_all(h)
    assert h.text("session.output_transcript.delta") == " ".join(COUNTED[:12]).upper()


def test_a_waiting_segment_that_fails_to_transcribe_leaves_the_next_one_its_place() -> None:
    """A segment waiting for its utterance id whose transcription fails takes none: the segment
    after it follows the last answered final directly, and the session ends idle."""
    h = Harness()
    translator = h.session.translator
    translator.begin("item_a")
    translator.final("item_a", "Hello world, how are you?", 100.0)
    final = translator.next_job()
    assert final is not None and final.kind.value == "final"
    translator.begin("item_b")
    translator.partial("item_b", "the house", 9, 200.0)
    translator.abandon("item_b")
    translator.begin("item_c")
    translator.final("item_c", "the house is red.", 300.0)
    assert translator.next_job() is None, "nothing of b or c before a's final is answered"
    translator.job_done(final, h.mt.draft(final.request))
    job = translator.next_job()
    assert job is not None and job.kind.value == "final" and job.utterance_id == final.utterance_id + 1
    translator.job_done(job, h.mt.draft(job.request))
    assert translator.idle
    h.drain()
    assert h.text("session.output_transcript.delta") == "Hallo Welt, wie geht es? die Haus ist rot."


def test_a_chinese_source_counts_two_characters_a_word_against_the_utterance_bound() -> None:
    """MT takes Chinese a character a word; `max_utterance_words` is in words, so a Chinese
    utterance is force-closed past twice as many characters, not in the middle of a sentence."""
    h = Harness(language="en", source="zh", directions=("zh-en",), max_utterance_words=3)
    translator = h.session.translator
    translator.begin("item_a")
    translator.partial("item_a", "我们现在有四", 6, 100.0, "zh")
    job = translator.next_job()
    assert job is not None and job.kind.value == "partial", "6 characters: 3 words of 2"
    translator.job_done(job, h.mt.draft(job.request))
    translator.partial("item_a", "我们现在有四个", 7, 200.0, "zh")
    job = translator.next_job()
    assert job is not None and job.kind.value == "forced_final", "7 characters"
    english = Harness(max_utterance_words=3).session.translator
    english.begin("item_b")
    english.partial("item_b", "Hello world, how are", 20, 100.0)
    job = english.next_job()
    assert job is not None and job.kind.value == "forced_final", "4 words of English"


def test_a_final_whose_translation_fails_is_reported_once_and_leaves_nothing_waiting() -> None:
    """MT answers a failed final with an error; the session reports the engine's own error once,
    counts the final as answered (so `session.close` completes) and keeps none of its words."""
    h = Harness()
    translator = h.session.translator
    translator.begin("item_a")
    translator.final("item_a", "Hello world.", 100.0)
    job = translator.next_job()
    assert job is not None and job.kind.value == "final"
    assert not translator.idle
    translator.job_failed(job, EngineFailure("boom"))
    errors = [e for e in h.drain() if e["type"] == "error"]
    assert len(errors) == 1 and "boom" not in json.dumps(errors)
    assert translator.idle
    assert not any(d.final_words for d in translator._directions.values())
    h.send("session.close")
    h.run()
    assert h.events[-1]["type"] == "session.closed"


def test_a_segment_is_decoded_whole_when_its_silence_begins_so_its_end_waits_for_no_step() -> None:
    """The early start: the silence that ends a segment starts a decode of all of it, which is
    its final transcript when the segment is committed; no step runs after the commit."""
    h = Harness()
    for _ in range(6):
        h.append(tone(0.5))
        h.run()
    steps = len(h.steps)
    h.append(silence(0.2))
    h.run()
    assert len(h.steps) == steps + 1 and not h.steps[-1].final, "decoded whole as the silence began"
    assert len(h.steps[-1].request.audio) >= 3.0 * 16_000, "all of it, at the model's 16 kHz"
    h.append(silence(0.8))
    h.run()
    assert len(h.steps) == steps + 1, "the commit took the pause's transcript"
    assert h.of("session.output_transcript.delta") and h.text("session.output_transcript.delta").endswith(".")
    h.send("session.close")
    h.run()
    assert h.events[-1]["type"] == "session.closed"
