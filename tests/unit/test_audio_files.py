"""Audio files decoded to 16 kHz mono: every container the endpoint takes, real encoders."""

from __future__ import annotations

import numpy as np
import pytest

from dragoman.audio.files import decode_audio_file
from dragoman.audio.rates import SAMPLE_RATE
from dragoman.errors import InvalidFile
from harness.audio_files import FORMATS, encode


def _tone(rate: int, seconds: float, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("extension", sorted(FORMATS))
def test_each_format_decodes_to_16k_mono(extension: str, channels: int) -> None:
    audio = decode_audio_file(encode(_tone(44_100, 2.0), 44_100, extension, channels), max_seconds=60)
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    assert audio.source_channels == channels
    # Lossy codecs pad a frame or two; the length is the file's, at 16 kHz.
    assert audio.seconds == pytest.approx(2.0, abs=0.05)
    spectrum = np.abs(np.fft.rfft(audio.samples))
    assert np.argmax(spectrum) * SAMPLE_RATE / len(audio.samples) == pytest.approx(440.0, abs=2.0)
    # Channels are averaged, not summed: a stereo copy of the tone is as loud as the mono one.
    rms = float(np.sqrt(np.mean(audio.samples**2)))
    assert rms == pytest.approx(0.5 / np.sqrt(2), rel=0.08)


def test_telephone_rate_is_resampled() -> None:
    audio = decode_audio_file(encode(_tone(8_000, 1.5, 300.0), 8_000, "wav"), max_seconds=60)
    assert audio.source_rate == 8_000
    assert len(audio.samples) == pytest.approx(1.5 * SAMPLE_RATE, abs=2)


#: A WAV header of 272-bit PCM: a stream FFmpeg finds and has no decoder for (found by the fuzzer).
UNDECODABLE_WAV = (
    b"RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xc0]\x00\x00"
    b"\x80\xbb\x00\x00\x02\x00\x10\x01data\xff\xff\xff\xff"
)


@pytest.mark.parametrize("data", [b"", b"not audio at all " * 64, b"RIFF" + bytes(200), UNDECODABLE_WAV])
def test_not_audio_is_the_clients_fault(data: bytes) -> None:
    with pytest.raises(InvalidFile) as raised:
        decode_audio_file(data, max_seconds=60)
    assert raised.value.status == 400 and raised.value.param == "file"


def test_a_file_past_the_length_limit_is_refused() -> None:
    data = encode(_tone(16_000, 4.0), 16_000, "flac")
    with pytest.raises(InvalidFile, match="longer than"):
        decode_audio_file(data, max_seconds=2.0)
    assert decode_audio_file(data, max_seconds=5.0).seconds == pytest.approx(4.0, abs=0.01)
