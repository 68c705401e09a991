"""Steps routed by language between two engines (`engines/asr/by_language.py`); no model loaded."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pytest

from dragoman.config import ASRSettings, InterpreterSettings
from dragoman.engines.asr.base import ASRCapabilities, ASREngine, PrefixMode, StepRequest, StepResult
from dragoman.engines.asr.by_language import LanguageRoutedASR
from dragoman.errors import ClientError, ConfigError, InvalidValue
from tests.unit.fakes import WordTokenizer


class Scripted(ASREngine):
    """Answers "<name> heard <n> samples", and keeps each call's requests."""

    def __init__(self, name: str, languages: set[str], mode: PrefixMode = PrefixMode.DECODER_PROMPT) -> None:
        self.name = name
        self.tokenizer = WordTokenizer()
        self.capabilities = ASRCapabilities(30.0 if name == "whisper" else 20.0, frozenset(languages), mode)
        self.calls: list[list[StepRequest]] = []
        self.warmed = self.closed = False

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        self.calls.append(list(requests))
        out: list[StepResult | ClientError] = []
        for request in requests:
            if request.language == "xx":
                out.append(InvalidValue("no such language"))
            else:
                text = f"{request.prefix}{self.name} heard {len(request.audio)}"
                out.append(StepResult(text, language=request.language or "de"))
        return out

    def batch_key(self, request: StepRequest) -> Hashable:
        return len(request.audio)

    def warm_up(self) -> None:
        self.warmed = True

    def close(self) -> None:
        self.closed = True


def audio(samples: int) -> np.ndarray:
    return np.zeros(samples, dtype=np.float32)


def routed() -> tuple[LanguageRoutedASR, Scripted, Scripted]:
    whisper, moonshine = Scripted("whisper", {"en", "de", "xx"}), Scripted("moonshine", {"en"})
    return LanguageRoutedASR(whisper, {"en": moonshine}), whisper, moonshine


def test_each_step_goes_to_its_languages_engine_and_results_keep_the_requests_order() -> None:
    engine, whisper, moonshine = routed()
    requests = [
        StepRequest(audio(10), language="en", prefix="Hi "),
        StepRequest(audio(20), language="de"),
        StepRequest(audio(30)),  # language open: the default engine detects it
        StepRequest(audio(40), language="en"),
        StepRequest(audio(50), language="xx"),
    ]
    results = engine.transcribe_batch(requests)
    texts = [r.text if isinstance(r, StepResult) else type(r).__name__ for r in results]
    assert texts == [
        "Hi moonshine heard 10",
        "whisper heard 20",
        "whisper heard 30",
        "moonshine heard 40",
        "InvalidValue",
    ], "a refusal stays in its own slot"
    assert [len(r.audio) for call in moonshine.calls for r in call] == [10, 40]
    assert [len(r.audio) for call in whisper.calls for r in call] == [20, 30, 50]


def test_steps_of_different_engines_never_share_a_batch() -> None:
    engine, _, _ = routed()
    english, german = StepRequest(audio(10), language="en"), StepRequest(audio(10), language="de")
    assert engine.batch_key(english) != engine.batch_key(german)
    assert engine.batch_key(english) == engine.batch_key(StepRequest(audio(10), language="en"))
    assert engine.batch_key(english) != engine.batch_key(StepRequest(audio(11), language="en")), "theirs kept"


def test_capabilities_and_lifecycle_cover_both_engines() -> None:
    engine, whisper, moonshine = routed()
    assert engine.name == "whisper" and engine.tokenizer is whisper.tokenizer
    assert engine.capabilities.max_audio_seconds == 20.0, "no item longer than either engine takes"
    assert engine.capabilities.languages == {"en", "de", "xx"}
    assert "en: moonshine" in engine.describe().backend
    engine.warm_up()
    assert whisper.warmed and moonshine.warmed
    engine.close()
    assert whisper.closed and moonshine.closed


def test_a_services_own_routes_apply_to_its_steps_only() -> None:
    """`interpreter.asr_routes`: the interpreter's English goes to Moonshine, a transcription
    session's stays with Whisper, and both scopes share the one Moonshine loaded."""
    whisper, moonshine = Scripted("whisper", {"en", "de"}), Scripted("moonshine", {"en"})
    engine = LanguageRoutedASR(whisper, {}, {"interpreter": {"en": moonshine}})
    requests = [
        StepRequest(audio(10), language="en", scope="interpreter"),
        StepRequest(audio(20), language="en"),
        StepRequest(audio(30), language="de", scope="interpreter"),
        StepRequest(audio(40), scope="interpreter"),  # still to be detected: Whisper
    ]
    texts = [r.text for r in engine.transcribe_batch(requests) if isinstance(r, StepResult)]
    assert texts == ["moonshine heard 10", "whisper heard 20", "whisper heard 30", "whisper heard 40"]
    assert engine.batch_key(requests[0]) != engine.batch_key(requests[1])
    assert "interpreter en: moonshine" in engine.describe().backend
    assert engine.capabilities.languages == {"en", "de"}
    server_wide = LanguageRoutedASR(whisper, {"en": moonshine}, {"interpreter": {"en": moonshine}})
    server_wide.warm_up()
    server_wide.close()
    assert moonshine.warmed and moonshine.closed and whisper.closed


def test_a_scoped_route_is_checked_like_the_servers() -> None:
    with pytest.raises(ConfigError, match=r"interpreter\.asr_routes: m does not transcribe 'de'"):
        LanguageRoutedASR(
            Scripted("whisper", {"en", "de"}), {}, {"interpreter": {"de": Scripted("m", {"en"})}}
        )


def test_the_interpreter_routes_english_to_moonshine_unless_told_otherwise() -> None:
    assert InterpreterSettings().asr_routes == {"en": "moonshine"}
    assert InterpreterSettings(asr_routes="").asr_routes == {}  # type: ignore[arg-type]
    named = InterpreterSettings(asr_routes="en=whisper-ct2:/models/w")  # type: ignore[arg-type]
    assert named.asr_routes == {"en": "whisper-ct2:/models/w"}


def test_an_engine_that_cannot_take_over_an_item_is_refused() -> None:
    whisper = Scripted("whisper", {"en", "de"})
    with pytest.raises(ConfigError, match="does not transcribe 'de'"):
        LanguageRoutedASR(whisper, {"de": Scripted("moonshine", {"en"})})
    remote = Scripted("remote", {"en"}, PrefixMode.CLIENT_AGREEMENT)
    with pytest.raises(ConfigError, match="cannot take over"):
        LanguageRoutedASR(whisper, {"en": remote})


@pytest.mark.parametrize(
    ("given", "routes"),
    [
        (["en=moonshine"], {"en": "moonshine"}),
        (
            "en=moonshine, de=whisper-ct2:/models/whisper-de",
            {"en": "moonshine", "de": "whisper-ct2:/models/whisper-de"},
        ),
        ({"EN": "moonshine"}, {"en": "moonshine"}),
        ([], {}),
    ],
)
def test_routes_are_read_from_flags_and_environment_strings(given: object, routes: dict[str, str]) -> None:
    assert ASRSettings(routes=given).routes == routes  # type: ignore[arg-type]


def test_a_malformed_route_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="LANGUAGE=BACKEND"):
        ASRSettings(routes=["moonshine"])  # type: ignore[arg-type]
