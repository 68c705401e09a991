"""A translation session's settings, and the languages a server translates into.

OpenAI's translation session lets a `session.update` change three things: "audio.output.language,
audio.input.transcription, and audio.input.noise_reduction"; "the session type and model are set at
creation and cannot be changed". The target language must be one the server has a calibrated
direction and a voice for; anything else is refused with the list of those it has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dragoman.errors import InvalidValue
from dragoman.sessions.mt.validation import language as primary_language

NoiseReductionType = Literal["near_field", "far_field"]
LANGUAGE_PARAM = "session.audio.output.language"


@dataclass(frozen=True)
class NoiseReduction:
    type: NoiseReductionType
    #: OpenAI: "Defaults to 1 when noise reduction is first enabled."
    strength: float = 1.0


@dataclass(frozen=True)
class NoiseReductionUpdate:
    """As sent: a strength left out "preserves the current strength"."""

    type: NoiseReductionType
    strength: float | None = None


@dataclass(frozen=True)
class TranslationConfig:
    #: The target language (ISO 639-1).
    language: str
    #: The transcription model the client asked for; None: no source transcript deltas.
    transcription: str | None = None
    noise_reduction: NoiseReduction | None = None

    def patched(self, values: Mapping[str, Any]) -> TranslationConfig:
        """This config with an update's `values` applied (the language is checked by the session)."""
        changes: dict[str, Any] = {}
        if "language" in values:
            changes["language"] = values["language"]
        if "transcription" in values:
            changes["transcription"] = values["transcription"]
        if "noise_reduction" in values:
            update: NoiseReductionUpdate | None = values["noise_reduction"]
            if update is None:
                changes["noise_reduction"] = None
            else:
                current = self.noise_reduction
                strength = update.strength
                if strength is None:
                    strength = current.strength if current is not None else 1.0
                changes["noise_reduction"] = NoiseReduction(update.type, strength)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Languages:
    """The target languages a server serves from one source language, from its MT directions."""

    source: str
    targets: tuple[str, ...]

    @classmethod
    def of(cls, directions: Sequence[str], source: str = "en") -> Languages:
        targets = sorted({d.split("-", 1)[1] for d in directions if d.split("-", 1)[0] == source})
        return cls(source, tuple(targets))

    def check(self, language: str) -> str:
        """The ISO 639-1 code of a target `language` ("de-DE" -> "de"); InvalidValue naming the
        supported ones for any other."""
        code = primary_language(language) if language.strip() else ""
        if code not in self.targets:
            raise InvalidValue(
                f"Unsupported output language {language[:40]!r}: this server translates "
                f"{self.source} speech into {', '.join(self.targets) or 'no language'}.",
                code="unsupported_language",
                param=LANGUAGE_PARAM,
            )
        return code
