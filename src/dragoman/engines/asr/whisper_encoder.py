"""Whisper's encoder side on CTranslate2: a batch's log-mel features, and the encoder calls
that turn them into the states the decoder attends to.

Separate from `whisper_ct2`, which picks each batch's window and decodes: this is the
audio-to-states half, with its mel framing and its split of big batches on a CPU.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.engines.asr.base import FloatAudio

#: Whisper's mel hop.
HOP = 160
#: The encoder halves the frame count, so windows are whole multiples of two hops.
GRAIN = 2 * HOP
#: On a CPU, one encoder call takes at most this many seconds of windows. The encoder's
#: self-attention grows with the square of a window, and a batch whose activations leave
#: the cache runs slower than its items one by one: on 2 cores (Zen 5, AVX2 or AVX-512),
#: eight 12 s windows of whisper-base encode in 0.66-0.78 s together and in 0.40-0.43 s
#: one at a time; eight 8 s windows in 0.39-0.41 s together and 0.24 s two at a time.
_CPU_ENCODE_SECONDS = 20.0


def read_n_mels(model: Any, folder: Path) -> int:
    """Mel bins the encoder expects: 80 for most Whisper models, 128 for large-v3."""
    n_mels = getattr(model, "n_mels", None)
    if isinstance(n_mels, int) and n_mels > 0:
        return n_mels
    pre = folder / "preprocessor_config.json"
    if pre.is_file():
        return int(json.loads(pre.read_text(encoding="utf-8")).get("feature_size", 80))
    return 80


def log_mel(extractor: Any, audios: Sequence[FloatAudio], window: int) -> npt.NDArray[np.float32]:
    """[batch, n_mels, window / hop] log-mel features from transformers' `WhisperFeatureExtractor`;
    silence pads each audio to `window`."""
    batch = np.zeros((len(audios), window), dtype=np.float32)
    for row, audio in zip(batch, audios, strict=True):
        row[: audio.shape[0]] = audio
    features = extractor(list(batch), sampling_rate=SAMPLE_RATE, padding="longest", return_tensors="np")[
        "input_features"
    ]
    return np.ascontiguousarray(features[..., : window // HOP], dtype=np.float32)


def encode(
    model: Any, ct2: Any, features: npt.NDArray[np.float32], window: int, *, split: bool, to_cpu: bool
) -> Any:
    """The encoder's output for a batch of features, in calls of at most
    `_CPU_ENCODE_SECONDS` of windows when `split` (on a CPU)."""
    per_call = len(features)
    if split:
        per_call = max(1, int(_CPU_ENCODE_SECONDS * SAMPLE_RATE) // window)
    if per_call >= len(features):
        return model.encode(ct2.StorageView.from_array(features), to_cpu=to_cpu)
    parts = [
        np.asarray(
            model.encode(
                ct2.StorageView.from_array(np.ascontiguousarray(features[i : i + per_call])),
                to_cpu=True,
            )
        )
        for i in range(0, len(features), per_call)
    ]
    return ct2.StorageView.from_array(np.concatenate(parts))
