"""PCM16 mono in, an audio file's bytes out, piece by piece as the audio is made.

The formats of OpenAI's `/v1/audio/speech` (`response_format`): raw `pcm` (16-bit signed
little-endian), `wav` (a RIFF header whose sizes say "unknown length", 0xFFFFFFFF, as a
stream cannot know them), and through FFmpeg's encoders in PyAV `mp3` (LAME), `opus` (in
Ogg), `aac` (ADTS) and `flac`. Each encoder writes into a sink that is drained after every
piece, so the first bytes leave while the rest is still spoken.
"""

from __future__ import annotations

import io
import struct
from typing import Literal

import av
import numpy as np

Format = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
FORMATS: tuple[Format, ...] = ("mp3", "opus", "aac", "flac", "wav", "pcm")

#: format -> (FFmpeg container, encoder)
_CODECS: dict[str, tuple[str, str]] = {
    "mp3": ("mp3", "libmp3lame"),
    "opus": ("ogg", "libopus"),
    "aac": ("adts", "aac"),
    "flac": ("flac", "flac"),
}
#: The Content-Type of each format.
MEDIA_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
_UNKNOWN_LENGTH = 0xFFFFFFFF


class _Sink(io.RawIOBase):
    """What the muxer writes to: kept until drained, never seeked (a stream cannot be)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._parts.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


def wav_header(rate: int, channels: int = 1) -> bytes:
    """A 16-bit PCM RIFF/WAVE header for a stream of unknown length."""
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * 2, channels * 2, 16)
    return (
        b"RIFF" + struct.pack("<I", _UNKNOWN_LENGTH) + b"WAVE"
        b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", _UNKNOWN_LENGTH)
    )


class StreamEncoder:
    """Encodes PCM16 mono at `rate` into `format`, piece by piece."""

    def __init__(self, format: Format, rate: int) -> None:
        self.format = format
        self.rate = rate
        self._started = False
        self._sink = _Sink()
        self._container: av.container.OutputContainer | None = None
        self._stream: av.audio.stream.AudioStream | None = None
        if format in _CODECS:
            container, codec = _CODECS[format]
            self._container = av.open(self._sink, mode="w", format=container)
            stream = self._container.add_stream(codec, rate=rate, layout="mono")
            assert isinstance(stream, av.audio.stream.AudioStream)
            self._stream = stream

    def feed(self, pcm: bytes) -> bytes:
        """Encode `pcm` (16-bit little-endian mono); returns the bytes ready so far."""
        head = b""
        if not self._started:
            self._started = True
            head = wav_header(self.rate) if self.format == "wav" else b""
        if self._stream is None:
            return head + pcm
        if pcm:
            samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate = self.rate
            self._mux(frame)
        return head + self._sink.drain()

    def finish(self) -> bytes:
        """Flush the encoder and close the file; returns the last bytes."""
        head = self.feed(b"") if not self._started else b""
        if self._stream is None or self._container is None:
            return head
        self._mux(None)
        self._container.close()
        self._stream = self._container = None
        return head + self._sink.drain()

    def _mux(self, frame: av.AudioFrame | None) -> None:
        assert self._stream is not None and self._container is not None
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
