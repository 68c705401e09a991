"""Base64 PCM16 on the wire <-> float32 samples in memory.

`pcm16_to_float(payload[, carry])` turns base64 PCM16 (little-endian, mono) into
(float32 in [-1, 1), the odd trailing byte). `carry` is the previous append's odd byte, so a
sample split across two appends is joined instead of shifting every sample after it. Strict
decoding: a malformed payload is an error, not silence.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np
from numpy.typing import NDArray

from dragoman.errors import InvalidAudio

#: Full scale of a signed 16-bit sample; dividing by it maps int16 onto [-1, 1).
_SCALE = 32768.0
_PCM16 = np.dtype("<i2")


def decode_base64(payload: object) -> bytes:
    """Strictly decode a base64 string: only the standard alphabet, correct padding, no whitespace.

    Raises `InvalidAudio` (a client error whose message is safe to send) for anything else.
    """
    if not isinstance(payload, str):
        raise InvalidAudio(f"audio must be a base64 string, not {_json_type(payload)}", param="audio")
    if len(payload) % 4:
        # Standard base64 always comes in groups of four; b64decode tolerates a stray "=".
        raise InvalidAudio("audio is not valid base64 (incorrect padding)", param="audio")
    try:
        # validate=True rejects characters outside the alphabet instead of silently skipping
        # them, which would decode garbage into audible noise.
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        # binascii's messages ("Incorrect padding", "Only base64 data is allowed", ...) are
        # fixed texts without any server detail; non-ASCII input raises a plain ValueError.
        reason = str(exc) if isinstance(exc, binascii.Error) else "non-ASCII characters"
        raise InvalidAudio(f"audio is not valid base64 ({reason})", param="audio") from None


def pcm16_to_float(payload: str, carry: bytes = b"") -> tuple[NDArray[np.float32], bytes]:
    """Decode base64 PCM16 (little-endian, mono) to float32 in [-1, 1) and the odd trailing byte.

    `carry` is the odd byte the previous call returned: it is the first half of a sample whose
    second half starts this payload. Pass the returned byte to the next call.
    """
    if len(carry) > 1:
        raise ValueError("carry holds at most one byte")
    data = decode_base64(payload)
    if carry:
        data = carry + data
    whole = len(data) - len(data) % 2
    samples = np.frombuffer(data, dtype=_PCM16, count=whole // 2).astype(np.float32)
    samples /= _SCALE
    return samples, data[whole:]


def float_to_pcm16(audio: NDArray[np.floating]) -> bytes:
    """Encode float samples as PCM16 little-endian bytes, clipping to the int16 range."""
    scaled = np.rint(np.asarray(audio, dtype=np.float64).reshape(-1) * _SCALE)
    return np.clip(scaled, -32768, 32767).astype(_PCM16).tobytes()


def float_to_base64(audio: NDArray[np.floating]) -> str:
    """Encode float samples as base64 PCM16, the wire form of an audio payload."""
    return base64.b64encode(float_to_pcm16(audio)).decode("ascii")


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for an error message a client understands."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
