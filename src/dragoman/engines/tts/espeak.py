"""The espeak-ng backend: formant synthesis in about a hundred languages (de, it and zh among them).

Robotic but intelligible, and the only voice for the languages no packaged neural voice
speaks. The library and its data come from the `espeakng-loader` wheel (libespeak-ng 1.52
with espeak-ng-data), so a fresh machine needs nothing from Debian; without that package,
Debian's `libespeak-ng1` is used where it is installed.

No Python package synthesizes through libespeak-ng (the bindings on PyPI either phonemize
only or run the `espeak-ng` program), so the C API is called here with ctypes, in
synchronous mode: `espeak_Synth` blocks and hands the audio to a callback in
`_BUFFER_MS` buffers, each emitted as it comes; the callback returns 1 to abort when the
request is cancelled. libespeak-ng keeps one global state (voice, rate, callback) and is
not thread-safe, so one process-wide lock serialises every call into it, its phonemiser's
too (`ipa`, the Italian front end of the Kokoro voices).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dragoman.config import TTSSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.tts.base import (
    Emit,
    FloatAudio,
    SpeechRequest,
    TTSCapabilities,
    TTSEngine,
    check_request,
)
from dragoman.engines.workers import CancelToken
from dragoman.errors import EngineFailure, ModelUnavailable
from dragoman.languages import primary_subtag

NAME = "espeak-ng"

# speak_lib.h
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_PARAM_RATE = 1
_EE_OK = 0
#: espeak_TextToPhonemes: IPA (bit 1), with multi-letter phonemes joined by the tie in bits 8-23 (bit 7).
_TIE = "^"
_PHONEMES_IPA_TIED = 0x02 | 0x80 | (ord(_TIE) << 8)

#: Audio handed to the callback per call: the streaming granularity.
_BUFFER_MS = 200
#: espeak-ng's default rate is speed 1.0; its own limits bound the rest.
_NORMAL_WPM, _MIN_WPM, _MAX_WPM = 175, 80, 450
#: espeak-ng voice names whose language is not their first subtag.
_ISO_639_1 = {"cmn": "zh"}

_Callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
_LOCK = threading.Lock()


class _Voice(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_void_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    )


def language_of(voice: str) -> str | None:
    """The ISO 639-1 code an espeak-ng voice speaks ("en-us" -> "en", "cmn" -> "zh"), if it has one."""
    primary = primary_subtag(voice)
    primary = _ISO_639_1.get(primary, primary)
    return primary if len(primary) == 2 else None


def _locate() -> tuple[str, str | None]:
    """The library file and its data folder (None: the library's compiled-in default)."""
    try:
        import espeakng_loader
    except ImportError:
        found = ctypes.util.find_library("espeak-ng")
        if found is None:
            raise ModelUnavailable(
                "espeak-ng is not installed: `pip install espeakng-loader==0.2.4` (part of `make install`) "
                "or `apt-get install libespeak-ng1`"
            ) from None
        return found, None
    return str(espeakng_loader.get_library_path()), str(espeakng_loader.get_data_path())


class _Library:
    """libespeak-ng, initialised once per process; call only with `_LOCK` held."""

    def __init__(self) -> None:
        path, data = _locate()
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise ModelUnavailable(f"cannot load libespeak-ng from {path}: {exc}") from exc
        lib.espeak_Initialize.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
        lib.espeak_SetSynthCallback.argtypes = (_Callback,)
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = (ctypes.c_char_p,)
        lib.espeak_SetParameter.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int)
        lib.espeak_ListVoices.argtypes = (ctypes.c_void_p,)
        lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_Voice))
        lib.espeak_TextToPhonemes.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int)
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        lib.espeak_Synth.argtypes = (
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        )
        rate = lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, _BUFFER_MS, data.encode() if data else None, _INITIALIZE_DONT_EXIT
        )
        if rate <= 0:
            raise ModelUnavailable(f"libespeak-ng failed to initialise (data folder {data or 'default'})")
        self._lib = lib
        self.sample_rate = int(rate)
        self._sink: Callable[[FloatAudio], bool] | None = None
        # Kept referenced: the library holds only the function pointer.
        self._callback = _Callback(self._on_audio)
        lib.espeak_SetSynthCallback(self._callback)
        self.voices = self._list_voices()

    def _list_voices(self) -> tuple[str, ...]:
        """Voice names as espeak_SetVoiceByName takes them: the identifier's last part ("gmw/en-US" -> "en-us")."""
        entries = self._lib.espeak_ListVoices(None)
        names: set[str] = set()
        i = 0
        while entries[i]:
            identifier = entries[i].contents.identifier
            if identifier:
                names.add(identifier.decode("utf-8", "replace").rsplit("/", 1)[-1].lower())
            i += 1
        return tuple(sorted(names))

    def _on_audio(self, wav: Any, count: int, events: Any) -> int:
        sink = self._sink
        if sink is None:
            return 1
        if count <= 0 or not wav:
            return 0
        samples = np.ctypeslib.as_array(wav, shape=(count,)).astype(np.float32) / 32768.0
        return 0 if sink(samples) else 1

    def ipa(self, voice: str, text: str) -> str:
        """The IPA of `text`, its clauses joined by spaces (the library drops their punctuation)."""
        self._select(voice)
        buffer = ctypes.create_string_buffer(text.encode("utf-8"))
        # The library advances the pointer clause by clause and sets it to NULL at the end.
        pointer = ctypes.c_void_p(ctypes.addressof(buffer))
        clauses = []
        while pointer.value:
            out = self._lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8, _PHONEMES_IPA_TIED)
            if out:
                clauses.append(out.decode("utf-8", "replace").strip())
        return " ".join(c for c in clauses if c)

    def _select(self, voice: str) -> None:
        if self._lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
            raise EngineFailure(f"espeak-ng could not select its voice {voice!r}")

    def synthesize(self, voice: str, text: str, wpm: int, sink: Callable[[FloatAudio], bool]) -> None:
        """Speak `text`, handing each buffer to `sink`; a sink that returns False aborts."""
        self._select(voice)
        self._lib.espeak_SetParameter(_PARAM_RATE, wpm, 0)
        data = text.encode("utf-8")
        self._sink = sink
        try:
            status = self._lib.espeak_Synth(
                data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
            )
        finally:
            self._sink = None
        if status != _EE_OK:
            raise EngineFailure(f"espeak_Synth failed with status {status}")


_library: _Library | None = None


def _shared_library() -> _Library:
    global _library
    with _LOCK:
        if _library is None:
            _library = _Library()
        return _library


def ipa(text: str, voice: str) -> str:
    """espeak-ng's IPA for `text` in `voice` ("it"), with stress marks and multi-letter phonemes
    tied by "^" ("d^ʒ"); clauses are joined by spaces, their punctuation is not kept."""
    library = _shared_library()
    with _LOCK:
        return library.ipa(voice, text)


class EspeakEngine:
    name = NAME

    def __init__(self) -> None:
        self._lib = _shared_library()
        voices = self._lib.voices
        languages = sorted({code for voice in voices if (code := language_of(voice)) is not None})
        self.capabilities = TTSCapabilities(
            sample_rate=self._lib.sample_rate, languages=tuple(languages), voices=voices
        )

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        check_request(request, self.capabilities, NAME)
        wpm = min(max(round(_NORMAL_WPM * request.speed), _MIN_WPM), _MAX_WPM)
        failures: list[BaseException] = []

        def sink(chunk: FloatAudio) -> bool:
            # Runs inside the C callback: an exception must not cross it, so it is kept for later.
            if cancel.cancelled:
                return False
            try:
                emit(chunk)
            except BaseException as exc:
                failures.append(exc)
                return False
            return True

        if cancel.cancelled:
            return
        with _LOCK:
            self._lib.synthesize(request.voice, request.text, wpm, sink)
        if failures:
            raise failures[0]

    def warm_up(self) -> None:
        self.synthesize(SpeechRequest("Ready.", "en-us"), CancelToken(), lambda chunk: None)

    def describe(self) -> EngineInfo:
        return EngineInfo(name="espeak-ng", backend=NAME, compute_type="formant")

    def close(self) -> None:
        """Nothing to release: the library stays loaded for the process (it cannot be re-initialised)."""


def create(settings: TTSSettings, cache_dir: Path) -> TTSEngine:
    """The registry's factory; espeak-ng has no weights to resolve."""
    return EspeakEngine()
