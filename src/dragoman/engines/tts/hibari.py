"""The hibari backend: a 7.9 MB int8 ONNX voice distilled from Kokoro's af_heart (US English, female).

hibari-tts ships the model, its lexicons and its out-of-vocabulary G2P model inside the
wheel (`hibari/assets/`), registered with their sha256 as the packaged model
`hibari-heart`. Only that voice is inside: hibari's other voices download at run time,
which fails here, so they are not offered. The model predicts a spectrum and hibari's
host-side DSP turns it into 24 kHz audio, one array per sentence.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hibari import Hibari

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

NAME = "hibari"
#: The packaged model (dragoman.weights) and the voice inside it.
MODEL = "hibari-heart"
VOICE = "heart"
#: hibari's own speed range; OpenAI's 0.25 is clamped up to it.
_MIN_SPEED, _MAX_SPEED = 0.5, 2.0


class HibariEngine:
    name = NAME

    def __init__(self, model_dir: Path, *, threads: int = 1) -> None:
        model = Path(model_dir) / "hibari.onnx"
        try:
            self._tts = Hibari(voice=VOICE, model=str(model), threads=threads)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelUnavailable(f"cannot load the hibari model {model}: {exc}") from exc
        self.capabilities = TTSCapabilities(
            sample_rate=int(Hibari.sample_rate), languages=("en",), voices=(VOICE,)
        )

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        check_request(request, self.capabilities, NAME)
        speed = min(max(request.speed, _MIN_SPEED), _MAX_SPEED)
        # A fixed seed for the noise component: the same text always sounds the same.
        rng = np.random.default_rng(0)
        # G2P for the whole text first (fast), then one model call per sentence, so a
        # cancel stops before the next sentence is synthesized rather than after it.
        for phonemes in self._tts.phonemize(request.text):
            if cancel.cancelled:
                return
            audio = self._tts.from_ids(self._tts.ids(phonemes), speed, rng)
            if len(audio) and not cancel.cancelled:
                emit(as_chunk(audio))

    def warm_up(self) -> None:
        # Loads the lexicons, the tagger and the OOV model ("Dragoman" is not in the lexicon).
        self.synthesize(SpeechRequest("Dragoman is ready.", VOICE), CancelToken(), lambda chunk: None)

    def describe(self) -> EngineInfo:
        return EngineInfo(name=MODEL, backend=NAME, compute_type="int8")

    def close(self) -> None:
        del self._tts


def create(settings: TTSSettings, cache_dir: Path) -> TTSEngine:
    """The registry's factory: the packaged voice, verified by `dragoman models install`."""
    from dragoman.weights import resolve

    return HibariEngine(resolve(MODEL, cache_dir, role="tts"), threads=engine_threads(settings.threads))
