"""Audio files to the models' 16 kHz mono float32, through PyAV (FFmpeg's demuxers and decoders).

Any container and codec FFmpeg reads is taken (wav, flac, ogg/opus and vorbis, mp3, m4a/aac,
webm/opus, aiff, ...), whatever its name or content type says: FFmpeg probes the bytes.
PyAV's resampler only converts each decoded frame to planar float32 at the file's own rate,
whose channels are then averaged; the rate conversion to 16 kHz is the project's soxr stream
resampler (`audio/resample.py`), as for live audio.

Blocking and CPU-bound (seconds for an hour of mp3): callers run it in a worker thread.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np
import numpy.typing as npt

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.audio.resample import StreamResampler
from dragoman.errors import InvalidFile

_UNREADABLE = (
    "The file could not be decoded as audio. Supported formats: flac, m4a, mp3, mp4, mpeg, mpga, "
    "oga, ogg, wav, webm."
)


@dataclass(frozen=True)
class DecodedAudio:
    #: Mono float32 at `SAMPLE_RATE`.
    samples: npt.NDArray[np.float32]
    #: The file's own rate and channel count, for logs.
    source_rate: int
    source_channels: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def decode_audio_file(data: bytes, *, max_seconds: float) -> DecodedAudio:
    """Decode the first audio stream of `data`; `InvalidFile` if it is not decodable audio or is
    longer than `max_seconds` (checked while decoding, so a long file is never held whole)."""
    if not data:
        raise InvalidFile("The audio file is empty.", param="file")
    limit = int(max_seconds * SAMPLE_RATE)
    try:
        container = av.open(io.BytesIO(data), mode="r", metadata_errors="ignore")
    except (av.FFmpegError, ValueError, OSError):
        raise InvalidFile(_UNREADABLE, param="file") from None
    with container:
        if not container.streams.audio:
            raise InvalidFile("The file has no audio stream.", param="file")
        stream = container.streams.audio[0]
        codec = stream.codec_context
        if codec is None:  # a codec FFmpeg has no decoder for (a WAV of 272-bit PCM)
            raise InvalidFile(_UNREADABLE, param="file")
        rate = int(codec.sample_rate or stream.sample_rate or 0)
        if rate <= 0:
            raise InvalidFile(_UNREADABLE, param="file")
        channels = int(codec.channels or 1)
        # Planar float32 in the file's own layout; the channels are averaged below (FFmpeg's
        # own downmix adds them at -3 dB, which clips a loud stereo file).
        to_float = av.AudioResampler(format="fltp", rate=rate)
        resampler = StreamResampler(rate, SAMPLE_RATE)
        pieces: list[npt.NDArray[np.float32]] = []
        try:
            for frame in container.decode(stream):
                for converted in to_float.resample(frame):
                    pieces.append(resampler.process(_samples(converted)))
                if resampler.out_samples > limit:
                    raise InvalidFile(
                        f"The audio is longer than this server's limit of {max_seconds:.0f} seconds.",
                        param="file",
                    )
            for converted in to_float.resample(None):
                pieces.append(resampler.process(_samples(converted)))
        except (av.FFmpegError, ValueError):
            raise InvalidFile(_UNREADABLE, param="file") from None
        pieces.append(resampler.drain())
    samples = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    if samples.size == 0:
        raise InvalidFile("The file holds no audio samples.", param="file")
    # A float file (WAVE_FORMAT_IEEE_FLOAT, 32-bit float flac) passes its samples through as
    # they are, NaN and infinities included, which no model may see: silence and full scale.
    np.nan_to_num(samples, copy=False, nan=0.0, posinf=1.0, neginf=-1.0)
    # Decoders may overshoot full scale slightly (mp3, aac); the models expect [-1, 1].
    np.clip(samples, -1.0, 1.0, out=samples)
    return DecodedAudio(
        samples=samples.astype(np.float32, copy=False), source_rate=rate, source_channels=channels
    )


def _samples(frame: av.AudioFrame) -> npt.NDArray[np.float32]:
    """A planar float32 frame as mono: the mean of its channels."""
    planes = np.asarray(frame.to_ndarray(), dtype=np.float32)
    mono: npt.NDArray[np.float32] = (
        planes[0] if planes.shape[0] == 1 else planes.mean(axis=0, dtype=np.float32)
    )
    return mono
