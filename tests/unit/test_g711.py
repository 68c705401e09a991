"""G.711 mu-law and A-law (audio/g711.py), checked against the standard's reference values and,
where Python still has it, the standard library's own codec (`audioop`, gone in 3.13)."""

from __future__ import annotations

import warnings
from types import ModuleType

import numpy as np
import pytest

from dragoman.audio import g711

ALL = np.arange(-32768, 32768, dtype=np.int16)

audioop: ModuleType | None
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import audioop
    except ImportError:  # Python 3.13+
        audioop = None


def test_reference_values() -> None:
    # Silence is 0xFF in mu-law and 0xD5 in A-law; full scale takes the extreme codes.
    assert g711.encode(np.array([0, 32767, -32768], dtype=np.int16), "pcmu") == bytes([0xFF, 0x80, 0x00])
    assert g711.encode(np.array([0, 32767, -32768], dtype=np.int16), "pcma") == bytes([0xD5, 0xAA, 0x2A])
    assert g711.decode(bytes([0xFF, 0x7F, 0x80, 0x00]), "pcmu").tolist() == [0, 0, 32124, -32124]
    assert g711.decode(bytes([0xD5, 0x55, 0xAA, 0x2A]), "pcma").tolist() == [8, -8, 32256, -32256]


@pytest.mark.parametrize("law", ["pcmu", "pcma"])
def test_every_code_decodes_and_encodes_back(law: g711.Law) -> None:
    codes = bytes(range(256))
    again = g711.encode(g711.decode(codes, law), law)
    if law == "pcmu":  # mu-law has two zeros, +0 (0xFF) and -0 (0x7F): both encode as +0
        assert again == codes.replace(b"\x7f", b"\xff")
    else:
        assert again == codes


@pytest.mark.parametrize("law", ["pcmu", "pcma"])
def test_the_error_is_within_the_segment_step(law: g711.Law) -> None:
    back = g711.decode(g711.encode(ALL, law), law).astype(np.int32)
    error = np.abs(back - ALL.astype(np.int32))
    # A logarithmic law: the step grows with the magnitude, about 1/16 of it at most.
    assert np.all(error <= np.maximum(np.abs(ALL.astype(np.int32)) / 16, 16) + 132)


@pytest.mark.skipif(audioop is None, reason="audioop was removed in Python 3.13")
@pytest.mark.parametrize("law", ["pcmu", "pcma"])
def test_matches_the_standard_librarys_codec(law: g711.Law) -> None:
    assert audioop is not None
    pcm = ALL.astype("<i2").tobytes()
    encode, decode = (
        (audioop.lin2ulaw, audioop.ulaw2lin) if law == "pcmu" else (audioop.lin2alaw, audioop.alaw2lin)
    )
    assert g711.encode(ALL, law) == encode(pcm, 2)
    assert g711.decode(bytes(range(256)), law).astype("<i2").tobytes() == decode(bytes(range(256)), 2)


def test_base64_transcoding_keeps_one_sample_per_byte() -> None:
    import base64

    law: g711.Law = "pcmu"
    payload = base64.b64encode(g711.encode(ALL[::256], law)).decode()
    pcm = base64.b64decode(g711.to_pcm16_base64(payload, law))
    assert len(pcm) == 2 * len(ALL[::256])
    assert g711.from_pcm16(pcm, law) == base64.b64decode(payload)
