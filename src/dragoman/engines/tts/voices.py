"""The voice catalog: the names clients use -> (backend, the backend's voice, language).

Three kinds of names:
- the local voices: "hibari" (US English, female), "joe" (US English, male), Kokoro's
  "kokoro-it-<name>" (Italian), "kokoro-zh-<name>" (Mandarin) and "kokoro-de-<name>" (German,
  read by an Italian voice), and "espeak-<language>"
  for each espeak-ng language offered here ("espeak-de", "espeak-zh");
- OpenAI's voice names ("alloy", "cedar", ...), so a client written for OpenAI still
  gets speech: each is mapped to a local English voice, the brighter ones to hibari and
  the deeper ones to joe;
- nothing at all: the configured default voice (`TTSSettings.voice`).

With a remote TTS server (`tts.base_url`) any other name is that server's to judge: OpenAI's
other voices, Kokoro-FastAPI's or a custom voice are passed on as given (`remote=True`), in the
language asked for, since the catalog cannot know what another server holds; a name the server
does not know fails there, as a server error.

A request for a language the chosen voice does not speak gets the best loaded voice of that
language: the one that transcribed back best through Whisper (`BEST_VOICES`, measured by
bench/tts_roundtrip.py), else a neural one, else espeak-ng's.
The catalog needs no model: which backends are loaded is the settings' business, and their
voices are simply absent when they are not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dragoman.engines.tts.kokoro_text import kokoro_voices, voice_language, voice_style
from dragoman.errors import ConfigError, InvalidValue
from dragoman.languages import primary_subtag
from dragoman.weights.registry import KOKORO_VOICES

#: The field of the Realtime session a voice name comes from.
VOICE_PARAM = "session.audio.output.voice"
LANGUAGE_PARAM = "language"

HIBARI = "hibari"
PIPER = "piper"
KOKORO = "kokoro"
ESPEAK = "espeak-ng"
BACKENDS: tuple[str, ...] = (HIBARI, PIPER, KOKORO, ESPEAK)
#: The remote server's voices (`engines/tts/openai_speech.py`): a name the catalog passes on.
REMOTE = "openai-speech"
#: The longest remote-only voice name passed on (OpenAI's and Kokoro-FastAPI's are far shorter).
REMOTE_NAME_MAX = 64

#: The voice a session gets when it names none: hibari, which transcribed back with a
#: lower WER than joe at a tenth of its compute (bench/tts_roundtrip.py).
DEFAULT_VOICE = "hibari"

#: ISO 639-1 -> espeak-ng voice, for the languages offered as "espeak-<code>".
ESPEAK_VOICES: dict[str, str] = {
    "en": "en-us",
    "de": "de",
    "it": "it",
    "zh": "cmn",
    "fr": "fr",
    "es": "es",
    "pt": "pt",
    "nl": "nl",
    "pl": "pl",
    "ru": "ru",
    "uk": "uk",
    "cs": "cs",
    "sv": "sv",
    "da": "da",
    "fi": "fi",
    "el": "el",
    "tr": "tr",
    "ro": "ro",
    "hu": "hu",
    "ja": "ja",
    "ko": "ko",
    "hi": "hi",
    "ar": "ar",
    "he": "he",
    "vi": "vi",
}

#: "kokoro-it-sara" -> "if_sara", "kokoro-de-nicola" -> "im_nicola.de": the language and the
#: voice's own name, as clients would say them.
KOKORO_NAMES: dict[str, str] = {
    f"kokoro-{voice_language(voice)}-{voice_style(voice).split('_', 1)[1]}": voice
    for voice in kokoro_voices(tuple(KOKORO_VOICES))
}

#: Each language's voices, best first, by the round trip through Whisper base (bench/tts_roundtrip.py,
#: bench/RESULTS.md 2026-12-03: WER for it, CER for zh, on 12 FLORES lines): the voice a session gets
#: for a language it names without a voice of that language. A language not here gets its neural
#: voice, else espeak-ng's. No German voice ships in any package: Kokoro's Italian ones read it.
BEST_VOICES: dict[str, tuple[str, ...]] = {
    "en": ("hibari", "joe", "espeak-en"),  # WER 2.4, 8.4 %
    # Kokoro's Italian voices reading German (kokoro_text.BORROWED_STYLES): WER 39.0, 39.4 %
    # against 60.1 % for espeak-ng (2026-12-07; 73.2 % on 2026-12-03).
    "de": ("kokoro-de-nicola", "kokoro-de-sara", "espeak-de"),
    "it": ("kokoro-it-nicola", "kokoro-it-sara", "espeak-it"),  # WER 11.4, 13.9, 46.5 %
    "zh": (  # CER 23.4, 23.8, 24.1, 24.6, 25.1, 25.5, 28.2, 52.3, 89.8 %
        "kokoro-zh-yunxi",
        "kokoro-zh-xiaobei",
        "kokoro-zh-xiaoxiao",
        "kokoro-zh-yunjian",
        "kokoro-zh-yunyang",
        "kokoro-zh-yunxia",
        "kokoro-zh-xiaoyi",
        "kokoro-zh-xiaoni",
        "espeak-zh",
    ),
}

#: OpenAI's voices -> the local voice that serves each: the Realtime API's, and the three that
#: only /v1/audio/speech offers (fable, nova, onyx), so that a client of either gets speech.
OPENAI_VOICES: dict[str, str] = {
    "alloy": "hibari",
    "coral": "hibari",
    "sage": "hibari",
    "shimmer": "hibari",
    "marin": "hibari",
    "nova": "hibari",
    "ash": "joe",
    "ballad": "joe",
    "echo": "joe",
    "verse": "joe",
    "cedar": "joe",
    "fable": "joe",
    "onyx": "joe",
}

#: Languages written differently by clients -> ISO 639-1.
_LANGUAGE_ALIASES = {"cmn": "zh", "zho": "zh", "eng": "en", "deu": "de", "ger": "de", "ita": "it"}


@dataclass(frozen=True)
class Voice:
    #: The name clients use.
    name: str
    #: The registry name of the backend that speaks it.
    backend: str
    #: The backend's own voice name (SpeechRequest.voice).
    backend_voice: str
    #: ISO 639-1.
    language: str

    @property
    def neural(self) -> bool:
        return self.backend != ESPEAK


LOCAL_VOICES: tuple[Voice, ...] = (
    Voice("hibari", HIBARI, "heart", "en"),
    Voice("joe", PIPER, "en_US-joe-medium", "en"),
    *(Voice(name, KOKORO, voice, voice_language(voice)) for name, voice in KOKORO_NAMES.items()),
    *(Voice(f"espeak-{code}", ESPEAK, voice, code) for code, voice in ESPEAK_VOICES.items()),
)


def normalize_language(language: str | None) -> str | None:
    """ "en-US" -> "en", "zh-Hans"/"cmn" -> "zh"; None and "" stay None (any language)."""
    if not language:
        return None
    primary = primary_subtag(language)
    return _LANGUAGE_ALIASES.get(primary, primary) or None


class VoiceCatalog:
    """The voices of the loaded backends, by the names clients use."""

    def __init__(
        self, backends: Iterable[str] = BACKENDS, default: str = DEFAULT_VOICE, *, remote: bool = False
    ) -> None:
        self.remote = remote
        enabled = set(backends)
        unknown = enabled - set(BACKENDS)
        if unknown:
            raise ConfigError(f"unknown TTS backends {sorted(unknown)}; known: {', '.join(BACKENDS)}")
        self._voices = {v.name: v for v in LOCAL_VOICES if v.backend in enabled}
        if not self._voices:
            raise ConfigError("no TTS backend is enabled; choose from " + ", ".join(BACKENDS))
        english = [v for v in self._voices.values() if v.language == "en"]
        # English neural voices first, so an OpenAI name never lands on espeak-ng while one is loaded.
        english.sort(key=lambda v: not v.neural)
        aliases: dict[str, Voice] = {}
        for alias, target in OPENAI_VOICES.items():
            voice = self._voices.get(target) or (english[0] if english else None)
            if voice is not None:
                aliases[alias] = voice
        self._aliases = aliases
        if default not in self._voices and default not in self._aliases:
            raise ConfigError(
                f"the default TTS voice {default!r} is not among the loaded voices: {', '.join(self.names)}"
            )
        self.default = self._voices.get(default) or self._aliases[default]

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a client may use, local voices first."""
        return (*self._voices, *self._aliases)

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends the catalog's voices need, in BACKENDS order."""
        used = {v.backend for v in self._voices.values()}
        return tuple(b for b in BACKENDS if b in used)

    def voice_for(self, name: str | None, language: str | None = None) -> Voice:
        """The voice to speak `language` (None: the voice's own) with, for the name a client gave.

        Raises InvalidValue for a name that is no voice here (with `remote`, one too long or
        unprintable to pass on), or a language no loaded voice speaks.
        """
        if name:
            voice = self._voices.get(name) or self._aliases.get(name)
            if voice is None and self.remote and len(name) <= REMOTE_NAME_MAX and name.isprintable():
                return Voice(name, REMOTE, name, normalize_language(language) or self.default.language)
            if voice is None:
                raise InvalidValue(
                    f"unknown voice {name[:40]!r}; known voices: {self._listing()}", param=VOICE_PARAM
                )
        else:
            voice = self.default
        wanted = normalize_language(language)
        if wanted is None or wanted == voice.language:
            return voice
        return self.for_language(language or "")

    def for_language(self, language: str, chosen: Mapping[str, str] | None = None) -> Voice:
        """The voice for `language` ("it", "zh-CN", "cmn"): the one `chosen` names for it
        (ISO 639-1 -> voice name, `check_chosen`) where it is loaded; else the best loaded: the
        default when it speaks it, else the first loaded of `BEST_VOICES`, else a neural voice,
        else espeak-ng's.

        Raises InvalidValue, listing the languages there are voices for, when none speaks it.
        """
        wanted = normalize_language(language)
        name = (chosen or {}).get(wanted or "")
        if name is not None and (name in self._voices or self.remote):
            return self.voice_for(name, wanted)
        if wanted is not None and self.default.language == wanted:
            return self.default
        for name in BEST_VOICES.get(wanted or "", ()):
            if name in self._voices:
                return self._voices[name]
        speaking = [v for v in self._voices.values() if v.language == wanted]
        speaking.sort(key=lambda v: not v.neural)  # stable: catalog order among equals
        if not speaking:
            raise InvalidValue(
                f"no voice here speaks {language[:20]!r}; languages: {', '.join(self.languages)}",
                param=LANGUAGE_PARAM,
            )
        return speaking[0]

    def check_chosen(self, chosen: Mapping[str, str], setting: str) -> None:
        """ConfigError, naming `setting`, for a voice chosen for a language that is no voice at
        all or speaks another language. One whose backend is not loaded is passed over
        (`for_language`), as is any name a remote server may know."""
        every = {v.name: v for v in LOCAL_VOICES}
        for language, name in chosen.items():
            voice = every.get(name)
            if voice is None and self.remote:
                continue
            if voice is None:
                raise ConfigError(f"{setting}: {name!r} is no voice; known voices: {self._listing()}")
            if voice.language != normalize_language(language):
                raise ConfigError(f"{setting}: {name!r} speaks {voice.language!r}, not {language!r}")

    def _listing(self) -> str:
        """Every name, Kokoro's and espeak-ng's as one entry each, short enough for an error message."""
        own = [v.name for v in self._voices.values() if v.backend not in (ESPEAK, KOKORO)]
        kokoro: dict[str, list[str]] = {}
        for v in self._voices.values():
            if v.backend == KOKORO:
                kokoro.setdefault(v.language, []).append(v.name.rsplit("-", 1)[1])
        if kokoro:
            listed = "; ".join(f"{language}: {', '.join(names)}" for language, names in kokoro.items())
            own.append(f"kokoro-<language>-<name> ({listed})")
        espeak = [v.language for v in self._voices.values() if v.backend == ESPEAK]
        if espeak:
            own.append(f"espeak-<language> ({', '.join(espeak)})")
        return ", ".join([*own, *self._aliases])

    @property
    def languages(self) -> tuple[str, ...]:
        """The ISO 639-1 codes some loaded voice speaks, sorted."""
        return tuple(sorted({v.language for v in self._voices.values()}))


_DEFAULT_CATALOG: VoiceCatalog | None = None


def _default_catalog() -> VoiceCatalog:
    global _DEFAULT_CATALOG
    if _DEFAULT_CATALOG is None:
        _DEFAULT_CATALOG = VoiceCatalog()
    return _DEFAULT_CATALOG


def voice_for(name: str | None, language: str | None = None) -> Voice:
    """`VoiceCatalog().voice_for`: every backend loaded, the default voice."""
    return _default_catalog().voice_for(name, language)


def voice_for_language(language: str) -> Voice:
    """`VoiceCatalog().for_language`: the best voice for `language` with every backend loaded."""
    return _default_catalog().for_language(language)
