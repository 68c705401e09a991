"""G.711 (ITU-T G.711): 8-bit mu-law and A-law samples <-> 16-bit linear PCM.

Telephony clients (Twilio media streams, SIP gateways) speak G.711 at 8 kHz: OpenAI's
Realtime formats `audio/pcmu` (mu-law) and `audio/pcma` (A-law), beta's `g711_ulaw` and
`g711_alaw`. Both laws are fixed 256-entry tables on decode; encoding is a lookup over
every int16 value, built once from the standard's segment rules (vectorised, no loop per
sample), so a frame of any size costs two numpy indexings.
"""

from __future__ import annotations

import base64
from functools import cache
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from dragoman.audio.pcm import decode_base64

Law = Literal["pcmu", "pcma"]
#: G.711's sample rate.
G711_RATE = 8000

#: mu-law's bias and clip, on 14-bit magnitudes.
_MU_BIAS = 0x21
_MU_CLIP = 8159


def _segment(magnitude: NDArray[np.int32], base: int) -> NDArray[np.int32]:
    """The segment (exponent, 0-7) of each magnitude: the position of its top bit above `base`."""
    seg = np.zeros_like(magnitude)
    for exponent in range(1, 8):
        seg[magnitude >= base << exponent] = exponent
    return seg


@cache
def _mu_encode_table() -> NDArray[np.uint8]:
    # On 14 bits, as the reference coder (and Python's former audioop) does: the magnitude of a
    # negative sample is that of its arithmetic shift.
    linear = np.arange(-32768, 32768, dtype=np.int32) >> 2
    mask = np.where(linear < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(linear), _MU_CLIP) + _MU_BIAS
    exponent = _segment(magnitude, 0x20)
    mantissa = (magnitude >> (exponent + 1)) & 0x0F
    code = np.where(magnitude > 0x1FFF, 0x7F, (exponent << 4) | mantissa) ^ mask
    return code.astype(np.uint8)


@cache
def _mu_decode_table() -> NDArray[np.int16]:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (code >> 4) & 0x07
    mantissa = code & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(code & 0x80, -magnitude, magnitude).astype(np.int16)


@cache
def _a_encode_table() -> NDArray[np.uint8]:
    linear = np.arange(-32768, 32768, dtype=np.int32) >> 3  # A-law works on 13 bits
    sign = np.where(linear >= 0, 0x80, 0x00)
    magnitude = np.where(linear >= 0, linear, -linear - 1)
    exponent = _segment(magnitude, 0x10)
    mantissa = np.where(exponent == 0, magnitude >> 1, magnitude >> exponent) & 0x0F
    code = np.where(magnitude >= 0x1000, 0x7F, (exponent << 4) | mantissa)
    return ((sign | code) ^ 0x55).astype(np.uint8)


@cache
def _a_decode_table() -> NDArray[np.int16]:
    code = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (code >> 4) & 0x07
    mantissa = code & 0x0F
    magnitude = np.where(
        exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0)
    )
    return np.where(code & 0x80, magnitude, -magnitude).astype(np.int16)


def decode(data: bytes, law: Law) -> NDArray[np.int16]:
    """G.711 bytes as int16 samples."""
    table = _mu_decode_table() if law == "pcmu" else _a_decode_table()
    return table[np.frombuffer(data, dtype=np.uint8)]


def encode(samples: NDArray[np.int16], law: Law) -> bytes:
    """int16 samples as G.711 bytes."""
    table = _mu_encode_table() if law == "pcmu" else _a_encode_table()
    return table[samples.astype(np.int32) + 32768].tobytes()


def to_pcm16_base64(payload: str, law: Law) -> str:
    """A base64 G.711 payload as base64 PCM16 (little-endian) at the same rate; raises InvalidAudio."""
    return base64.b64encode(decode(decode_base64(payload), law).astype("<i2").tobytes()).decode("ascii")


def from_pcm16(pcm: bytes, law: Law) -> bytes:
    """PCM16 little-endian bytes (an even count) as G.711 bytes."""
    return encode(np.frombuffer(pcm, dtype="<i2"), law)
