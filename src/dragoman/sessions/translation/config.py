"""A translation session's settings, and the languages a server translates into.

OpenAI's translation session lets a `session.update` change three things: "audio.output.language,
audio.input.transcription, and audio.input.noise_reduction"; "the session type and model are set at
creation and cannot be changed". The target language must be one the server has a calibrated
direction and a voice for; anything else is refused with the list of those it has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dragoman.errors import InvalidValue
from dragoman.languages import primary_subtag
from dragoman.sessions.speech.config import NoiseReduction, SessionConfig, with_noise_reduction

LANGUAGE_PARAM = "session.audio.output.language"


@dataclass(frozen=True)
class TranslationConfig:
    #: The target language (ISO 639-1).
    language: str
    #: The transcription model the client asked for; None: no source transcript deltas.
    transcription: str | None = None
    noise_reduction: NoiseReduction | None = None

    def patched(self, values: Mapping[str, Any]) -> TranslationConfig:
        """This config with an update's `values` applied (the language is checked by the session)."""
        values = with_noise_reduction(values, self.noise_reduction)
        fields = ("language", "transcription", "noise_reduction")
        return dataclasses.replace(self, **{name: values[name] for name in fields if name in values})


#: `interpreter.source_language` for speakers of any language the server translates from: each
#: segment's language is detected (OpenAI's translation session takes no input language).
AUTO = "auto"


@dataclass(frozen=True)
class Languages:
    """The languages a server translates, from its MT directions: from one source language,
    or (`AUTO`) from whichever one each segment is heard in."""

    source: str
    targets: tuple[str, ...]
    #: (source, target) of each direction served.
    pairs: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, directions: Sequence[str], source: str = "en") -> Languages:
        pairs = {(d.split("-", 1)[0], d.split("-", 1)[1]) for d in directions}
        if source != AUTO:
            pairs = {(s, t) for s, t in pairs if s == source}
        return cls(source, tuple(sorted({t for _, t in pairs})), frozenset(pairs))

    @property
    def sources(self) -> tuple[str, ...]:
        """The languages speech is translated from."""
        if self.source != AUTO:
            return (self.source,)
        return tuple(sorted({s for s, t in self.pairs if t in self.targets}))

    def heard(self, language: str | None, target: str) -> str:
        """The source of a segment heard in `language` (None: the engine did not say) that is
        translated into `target`: that language when a direction serves it or it is the target
        itself; InvalidValue naming the languages translated into `target` for any other."""
        if self.source != AUTO:
            return self.source
        code = primary_subtag(language) if language and language.strip() else ""
        if code == target or (code, target) in self.pairs:
            return code
        froms = sorted({s for s, t in self.pairs if t == target})
        raise InvalidValue(
            f"The speech was heard as {code or 'an unknown language'!r}: this server translates "
            f"{', '.join(froms) or 'no language'} speech into {target}. The segment is not translated.",
            code="unsupported_language",
        )

    def check(self, language: str) -> str:
        """The ISO 639-1 code of a target `language` ("de-DE" -> "de"); InvalidValue naming the
        supported ones for any other."""
        code = primary_subtag(language) if language.strip() else ""
        if code not in self.targets:
            raise InvalidValue(
                f"Unsupported output language {language[:40]!r}: this server translates "
                f"{', '.join(self.sources) or 'no language'} speech into "
                f"{', '.join(self.targets) or 'no language'}.",
                code="unsupported_language",
                param=LANGUAGE_PARAM,
            )
        return code


def checked(
    config: TranslationConfig, asked: str, languages: Languages, voices: Callable[[str], str]
) -> TranslationConfig:
    """`config` with its language checked: a direction to it, and a voice for it (`voices`: the
    voice name for a language, InvalidValue when none speaks it)."""
    language = languages.check(asked)
    try:
        voices(language)
    except InvalidValue:
        raise InvalidValue(
            f"No voice on this server speaks {language!r}; translations into "
            f"{', '.join(languages.targets)} are served where a voice speaks them.",
            code="unsupported_language",
            param=LANGUAGE_PARAM,
        ) from None
    return TranslationConfig(language, config.transcription, config.noise_reduction)


def check_model(asked: str | None, model: str, names: frozenset[str]) -> None:
    """An update may name the session's `model` (by any of its `names`), and no other."""
    if asked is not None and asked not in names:
        raise InvalidValue(
            f"The model is set when the session is created ({model!r}) and cannot be changed.",
            param="session.model",
        )


#: The interpreter's re-decode cadence. A segment's first translated text waits for source
#: words MT may commit against, and those come at step `unfixed_chunks` (the first stable
#: prefix): at transcription's 2 s x 2 steps, 4.4 s after the speech began, and the text 1 s
#: later (FLEURS en-de and en-zh, 1 session, AVX-512 EPYC). A step every 0.8 s brings the first
#: partial at 1.0 s; the stable prefix waits for the third step (2.7 s), since one taken from a
#: single short decode locks in what Whisper mishears at the start of a phrase ("All nails are
#: more sideworlds" for "All nouns alongside the word", with 1 s x 2 steps), which MT then
#: commits against. Measured: first text p50 5.5 -> 3.4 s, BLEU (sum of en-de and en-zh) 40.7 -> 46.1.
#: Again with Moonshine hearing English (2026-12-04, 5 FLEURS clips): 2 steps instead of 3 took
#: the first text from 3.2 to 2.0 s, but the source WER from 15.5 to 18.4 % and en-it's BLEU
#: ratio from 0.88 to 0.69. Words the second step says exactly as the first did go out at the
#: second step (`SessionConfig.agree_early`): first text p50 3.15 -> 2.87 s (FLEURS en-de, 1
#: session; 3.47 -> 3.12 s at 2), 2.99 -> 1.85 s (FLORES read by hibari), source WER unchanged
#: (15.5 and 3.3 %), 2026-12-04 on AVX-512 (docs/interpreter.md).
INTERPRETER_CHUNK_SECONDS = 0.8
INTERPRETER_UNFIXED_CHUNKS = 3


#: The scope of the interpreter's ASR steps, which take `interpreter.asr_routes`.
ASR_SCOPE = "interpreter"


def interpreter_speech(speech: SessionConfig) -> SessionConfig:
    """The speech front's settings for a translation session: `speech` at the interpreter's
    cadence, its steps taking the interpreter's ASR routes."""
    return dataclasses.replace(
        speech,
        chunk_seconds=INTERPRETER_CHUNK_SECONDS,
        unfixed_chunks=INTERPRETER_UNFIXED_CHUNKS,
        agree_early=True,
        asr_scope=ASR_SCOPE,
    )
