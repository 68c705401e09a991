"""A property-based fuzzer for `decode_audio_file`, which reads every uploaded file
(`/v1/audio/transcriptions`): FFmpeg's demuxers and decoders fed real files of each format,
truncated, with bytes overwritten or inserted, and bytes that are no file at all.

The properties: a file is decoded, or refused with `InvalidFile` (a 400 naming `file`); never
another exception. What is decoded is what the models take: 16 kHz mono float32, finite, in
[-1, 1], within the length limit.
"""

from __future__ import annotations

import functools
import struct

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dragoman.audio.encoding import StreamEncoder, wav_header
from dragoman.audio.files import decode_audio_file
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.errors import InvalidFile
from tests.unit.fuzz_strategies import FUZZ

MAX_SECONDS = 4.0
RATE = 24_000


def tone_pcm(seconds: float) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.5 * np.sin(2 * np.pi * 330 * t) * 32767).astype("<i2").tobytes()


@functools.cache
def encoded(format: str) -> bytes:
    encoder = StreamEncoder(format, RATE)  # type: ignore[arg-type]
    return encoder.feed(tone_pcm(1.0)) + encoder.finish()


def float_wav(samples: list[float], rate: int = 16_000) -> bytes:
    """A WAVE_FORMAT_IEEE_FLOAT file: samples a decoder passes through as they are, NaN included."""
    data = struct.pack(f"<{len(samples)}f", *samples)
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + 16 + 8 + len(data))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(encoded(draw(st.sampled_from(["wav", "flac", "mp3", "opus", "aac"]))))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["truncate", "overwrite", "insert"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "truncate":
            del data[at:]
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at : at + len(chunk)] = chunk
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
    return bytes(data)


files = st.one_of(
    damaged(),
    damaged(),
    st.binary(max_size=200),
    st.builds(
        float_wav,
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=400),
    ),
    st.just(wav_header(16_000) + tone_pcm(6.0)),  # past the limit
)


@FUZZ
@given(files)
@example(float_wav([0.1, float("nan"), float("inf"), -float("inf"), 3.0] * 20))
def test_any_file_is_decoded_to_what_the_models_take_or_refused(data: bytes) -> None:
    try:
        decoded = decode_audio_file(data, max_seconds=MAX_SECONDS)
    except InvalidFile as refused:
        assert refused.param == "file" and refused.message
        return
    samples = decoded.samples
    assert samples.dtype == np.float32 and samples.ndim == 1 and samples.size > 0
    assert np.isfinite(samples).all(), "no NaN or infinity reaches a model"
    assert float(np.abs(samples).max()) <= 1.0
    assert decoded.seconds <= MAX_SECONDS + 1.0


@pytest.mark.parametrize("format", ["wav", "flac", "mp3", "opus", "aac"])
def test_each_undamaged_file_is_the_tone(format: str) -> None:
    # The fuzzer's seeds are real files: undamaged, each decodes to a second of its tone.
    decoded = decode_audio_file(encoded(format), max_seconds=MAX_SECONDS)
    assert abs(decoded.seconds - 1.0) < 0.1 and decoded.source_rate in (RATE, 44_100, 48_000)
    spectrum = np.abs(np.fft.rfft(decoded.samples))
    assert abs(np.argmax(spectrum) * SAMPLE_RATE / len(decoded.samples) - 330) < 10
