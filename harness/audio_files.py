"""Audio files made in the tests: real encoders (PyAV's FFmpeg) write each container the
file endpoint takes, from real or generated samples."""

from __future__ import annotations

import io
from fractions import Fraction

import av
import numpy as np
import numpy.typing as npt

#: Container, codec and the codec's sample format, by file extension.
FORMATS: dict[str, tuple[str, str, str]] = {
    "wav": ("wav", "pcm_s16le", "s16"),
    "flac": ("flac", "flac", "s16"),
    "mp3": ("mp3", "libmp3lame", "fltp"),
    "ogg": ("ogg", "libopus", "flt"),
    "m4a": ("ipod", "aac", "fltp"),
    "webm": ("webm", "libopus", "flt"),
}
#: Opus takes 48 kHz (and a few lower rates); the others take the source rate.
_OPUS_RATE = 48_000


def encode(samples: npt.NDArray[np.float32], rate: int, extension: str, channels: int = 1) -> bytes:
    """`samples` (mono float32 in [-1, 1]) as a file of `extension`, `channels` copies wide."""
    container_format, codec, sample_format = FORMATS[extension]
    out_rate = _OPUS_RATE if codec == "libopus" else rate
    layout = "mono" if channels == 1 else "stereo"
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container_format) as container:
        stream = container.add_stream(codec, rate=out_rate, layout=layout)
        assert isinstance(stream, av.AudioStream)
        stream.format = sample_format
        to_codec = av.AudioResampler(format=sample_format, layout=layout, rate=out_rate)
        block = 4096
        for offset in range(0, len(samples), block):
            chunk = np.ascontiguousarray(samples[offset : offset + block], dtype=np.float32)
            wide = np.repeat(chunk[None, :], channels, axis=0).T.reshape(1, -1)  # packed channels
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(wide), format="flt", layout=layout)
            frame.sample_rate = rate
            frame.pts = offset
            frame.time_base = Fraction(1, rate)
            for converted in to_codec.resample(frame):
                container.mux(stream.encode(converted))
        for converted in to_codec.resample(None):
            container.mux(stream.encode(converted))
        container.mux(stream.encode(None))
    return buffer.getvalue()
