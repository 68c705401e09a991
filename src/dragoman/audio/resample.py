"""Streaming resampling of mono float32 audio to the models' 16 kHz.

Client audio (24 kHz for OpenAI's GA `audio/pcm`) is resampled to the model's 16 kHz
as it arrives. soxr's stream resampler keeps its filter state between chunks, so
resampling an append at a time gives the same samples as resampling the whole stream
at once; it holds back a few milliseconds of output for its lookahead until more input
(or the end of the stream) arrives.
"""

from __future__ import annotations

import numpy as np
import soxr
from numpy.typing import NDArray

from dragoman.audio.rates import SAMPLE_RATE

_EMPTY = np.zeros(0, dtype=np.float32)


class StreamResampler:
    """Resample a mono float32 stream from `in_rate` to `out_rate`, chunk by chunk.

    `in_samples` and `out_samples` count every sample taken and given since creation, across
    drains, so a caller can compare the output clock with the input clock.
    """

    def __init__(self, in_rate: int, out_rate: int = SAMPLE_RATE) -> None:
        if in_rate <= 0 or out_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} -> {out_rate}")
        self.in_rate = in_rate
        self.out_rate = out_rate
        self.in_samples = 0
        self.out_samples = 0
        # The counters at the last start-over, from which `held` is reckoned.
        self._base_in = 0
        self._base_out = 0
        self._stream: soxr.ResampleStream | None = None
        if in_rate != out_rate:
            self._stream = soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality="HQ")

    @property
    def passthrough(self) -> bool:
        return self._stream is None

    @property
    def held(self) -> int:
        """Output samples owed for input already taken (what the lookahead holds back)."""
        taken = self.in_samples - self._base_in
        given = self.out_samples - self._base_out
        return max(taken * self.out_rate // self.in_rate - given, 0)

    def process(self, audio: NDArray[np.floating]) -> NDArray[np.float32]:
        """Resample the next piece of the stream; returns what is ready (possibly nothing).

        A pass-through returns the input itself when it already is contiguous float32.
        """
        chunk = _mono_float32(audio)
        self.in_samples += len(chunk)
        if self._stream is None:
            out = chunk
        else:
            out = np.asarray(self._stream.resample_chunk(chunk), dtype=np.float32)
        self.out_samples += len(out)
        return out

    def drain(self) -> NDArray[np.float32]:
        """Everything still held, as if the stream ended here; then start over fresh.

        soxr rounds the output of a finished stream up, so after a drain the output may be up
        to one sample ahead of `in_samples * out_rate / in_rate`; callers that keep one
        timeline over many drains realign on the counters.
        """
        if self._stream is None:
            return _EMPTY.copy()
        out = np.asarray(self._stream.resample_chunk(_EMPTY, last=True), dtype=np.float32)
        self.out_samples += len(out)
        self.reset()
        return out

    def reset(self) -> None:
        """Drop what the resampler holds without returning it; the counters go on."""
        if self._stream is not None:
            self._stream.clear()
        self._base_in = self.in_samples
        self._base_out = self.out_samples


def _mono_float32(audio: NDArray[np.floating]) -> NDArray[np.float32]:
    chunk = np.ascontiguousarray(audio, dtype=np.float32)
    if chunk.ndim != 1:
        raise ValueError(f"expected mono audio as a 1-D array, got shape {chunk.shape}")
    return chunk


def to_model_rate(pieces: list[NDArray[np.floating]], in_rate: int) -> NDArray[np.float32]:
    """Audio that came whole (in pieces, one stream), at the models' 16 kHz."""
    resampler = StreamResampler(in_rate)
    out = [resampler.process(piece) for piece in pieces]
    return np.concatenate([*out, resampler.drain()]) if out else _EMPTY.copy()
