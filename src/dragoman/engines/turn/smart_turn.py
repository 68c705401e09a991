"""Smart Turn v3.2 (pipecat's end-of-turn model) on onnxruntime.

The model ships in the `pipecat-ai` wheel as `audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx`;
only that file is read, pipecat itself is never imported. Its graph, as onnxruntime reports it:

    inputs:  input_features [batch, 80, 800] float32 (Whisper log-mel of 8 s at 16 kHz)
    outputs: logits [batch, 1] float32 (despite the name, already a sigmoid: P(turn complete))

The input is prepared exactly as pipecat's `LocalSmartTurnAnalyzerV3._predict_endpoint` does:
keep the last 8 s of the turn, zero-pad at the start when shorter, normalise the waveform to
zero mean and unit variance, then take `WhisperFeatureExtractor(chunk_length=8)`'s log-mel
(400-point periodic Hann STFT, hop 160, reflect-centred, 80 Slaney mel bands, log10, clamped to
8 below the peak, scaled by (x + 4) / 4, the last frame dropped). The numpy below follows
pipecat's vendored copy of that extractor (`_whisper_features.py`) step for step; the engine
test checks it against transformers' own extractor.

One `SmartTurnModel` (one onnxruntime session, which is safe to run from many threads) serves
every session of the process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.engines.turn.base import TurnCapabilities
from dragoman.engines.workers.activity import ACTIVITY
from dragoman.errors import ModelUnavailable

#: pipecat: "Truncate to 8 seconds (keeping the end) or pad to 8 seconds".
SECONDS = 8
N_SAMPLES = SECONDS * SAMPLE_RATE
N_FFT = 400
HOP = 160
N_MELS = 80
N_FRAMES = N_SAMPLES // HOP
_INPUT = "input_features"


def _hz_to_mel(freq: NDArray[np.float64]) -> NDArray[np.float64]:
    """The Slaney mel scale: linear below 1 kHz, logarithmic above."""
    mels = 3.0 * freq / 200.0
    log = freq >= 1000.0
    mels[log] = 15.0 + np.log(freq[log] / 1000.0) * (27.0 / np.log(6.4))
    return mels


def _mel_to_hz(mels: NDArray[np.float64]) -> NDArray[np.float64]:
    freq = 200.0 * mels / 3.0
    log = mels >= 15.0
    freq[log] = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mels[log] - 15.0))
    return freq


def _mel_filters() -> NDArray[np.float64]:
    """Slaney-normalised triangular filters [N_MELS, N_FFT // 2 + 1] from 0 Hz to Nyquist."""
    edges = np.array([0.0, SAMPLE_RATE / 2.0])
    low, high = _hz_to_mel(edges)
    bands = _mel_to_hz(np.linspace(low, high, N_MELS + 2))
    bins = np.linspace(0, SAMPLE_RATE // 2, N_FFT // 2 + 1)
    slopes = bands[None, :] - bins[:, None]
    widths = np.diff(bands)
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    filters *= 2.0 / (bands[2 : N_MELS + 2] - bands[:N_MELS])
    return np.ascontiguousarray(filters.T)


_FILTERS = _mel_filters()
_WINDOW = np.hanning(N_FFT + 1)[:-1]  # periodic, as torch.hann_window


def last_seconds(audio: NDArray[np.float32]) -> NDArray[np.float32]:
    """The last 8 s of `audio`, zero-padded at the start to exactly 8 s."""
    audio = np.asarray(audio, dtype=np.float32)
    if len(audio) >= N_SAMPLES:
        return audio[len(audio) - N_SAMPLES :]
    return np.concatenate((np.zeros(N_SAMPLES - len(audio), dtype=np.float32), audio))


def log_mel(audio: NDArray[np.float32]) -> NDArray[np.float32]:
    """Whisper's log-mel [80, 800] of exactly 8 s of 16 kHz audio, normalised as pipecat does."""
    if audio.shape != (N_SAMPLES,):
        raise ValueError(f"expected {N_SAMPLES} samples, got shape {audio.shape}")
    # Normalised in float32 before the spectrogram, as transformers' extractor does.
    x = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
    padded = np.pad(x.astype(np.float64), N_FFT // 2, mode="reflect")
    frames = sliding_window_view(padded, N_FFT)[::HOP]
    power = np.abs(np.fft.rfft(frames * _WINDOW, axis=-1)) ** 2  # [801, 201]
    mel = np.log10(np.maximum(1e-10, _FILTERS @ power.T))[:, :-1]
    mel = np.maximum(mel, mel.max() - 8.0)
    features: NDArray[np.float32] = ((mel + 4.0) / 4.0).astype(np.float32)
    return features


class SmartTurnModel:
    """The loaded Smart Turn v3.2 graph: `completion_probability` of a turn's audio."""

    name = "smart-turn-v3.2"
    capabilities = TurnCapabilities(max_audio_seconds=float(SECONDS))

    def __init__(self, session: ort.InferenceSession) -> None:
        inputs = [(i.name, tuple(i.shape)) for i in session.get_inputs()]
        if len(inputs) != 1 or inputs[0][0] != _INPUT or inputs[0][1][1:] != (N_MELS, N_FRAMES):
            raise ModelUnavailable(f"not a Smart Turn v3 model: inputs {inputs}")
        self.session = session

    @classmethod
    def load(cls, path: Path | str) -> SmartTurnModel:
        """Load the ONNX model at `path` (`resolve("smart-turn-v3.2", cache_dir)`).

        One thread per call, as pipecat's default `cpu_count=1`: sessions run side by side
        instead, and a call (a few tens of ms) stays off the other engines' cores.
        """
        model_path = Path(path)
        if not model_path.is_file():
            raise ModelUnavailable(f"turn model not found: {model_path}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ModelUnavailable(f"cannot load turn model {model_path}: {exc}") from exc
        return cls(session)

    def completion_probability(self, audio: NDArray[np.float32]) -> float:
        """P(turn complete) of the turn's 16 kHz audio (its last 8 s count)."""
        samples = np.asarray(audio, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected mono audio as a 1-D array, got shape {samples.shape}")
        # Counted as an engine call (`engines.workers.activity`): it runs in the session's own
        # thread, in no worker, and the LLM must not take its core meanwhile.
        with ACTIVITY.running():
            features = log_mel(last_seconds(samples))[None]
            (output,) = self.session.run(None, {_INPUT: features})
        return float(np.asarray(output).reshape(-1)[0])
