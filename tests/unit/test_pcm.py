"""Base64 PCM16 decoding: odd-byte carry, strict base64, sample range."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from dragoman.audio.pcm import float_to_base64, float_to_pcm16, pcm16_to_float
from dragoman.errors import ClientError, InvalidAudio


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _known_pcm() -> tuple[bytes, np.ndarray]:
    values = np.array([0, 1, -1, 256, -256, 32767, -32768, 12345, -12345, 0x1234, -0x0FED], dtype="<i2")
    return values.tobytes(), values.astype(np.float32) / 32768.0


def test_decodes_little_endian_samples() -> None:
    raw, expected = _known_pcm()
    samples, odd = pcm16_to_float(_b64(raw))
    assert samples.dtype == np.float32
    np.testing.assert_array_equal(samples, expected)
    assert odd == b""
    # 0x1234 little-endian is the bytes 34 12; a big-endian reading would give 0x3412.
    assert pcm16_to_float(_b64(b"\x34\x12"))[0][0] == pytest.approx(0x1234 / 32768)


@pytest.mark.parametrize("split", range(1, 22, 2))
def test_sample_split_across_appends_is_joined(split: int) -> None:
    raw, expected = _known_pcm()
    first, odd = pcm16_to_float(_b64(raw[:split]), b"")
    assert odd == raw[split - 1 : split]
    second, rest = pcm16_to_float(_b64(raw[split:]), odd)
    assert rest == b""
    np.testing.assert_array_equal(np.concatenate([first, second]), expected)


def test_many_small_appends_equal_one_decode() -> None:
    rng = np.random.default_rng(7)
    raw = rng.integers(-32768, 32768, size=1001, dtype=np.int16).astype("<i2").tobytes()
    whole, _ = pcm16_to_float(_b64(raw))
    cuts = np.sort(rng.choice(np.arange(1, len(raw)), size=60, replace=False))
    parts, carry = [], b""
    for piece in np.split(np.frombuffer(raw, dtype=np.uint8), cuts):
        samples, carry = pcm16_to_float(_b64(piece.tobytes()), carry)
        parts.append(samples)
    assert carry == b""
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_single_byte_and_empty_payloads() -> None:
    samples, odd = pcm16_to_float(_b64(b"\x01"))
    assert len(samples) == 0 and odd == b"\x01"
    samples, odd = pcm16_to_float("", b"\x01")
    assert len(samples) == 0 and odd == b"\x01"
    samples, odd = pcm16_to_float(_b64(b"\x80"), b"\x00")
    assert samples.tolist() == [-1.0] and odd == b""


@pytest.mark.parametrize(
    "payload",
    [
        "AAA",  # missing padding
        "AAAA=",  # padding after a whole group
        "A===",
        "AA==AA==",  # padding inside the data
        "AAAA AAAA",  # whitespace
        "AAAA\nAAAA",
        "AA-_",  # the URL-safe alphabet
        "AAA*",
        "ÀÀÀÀ",  # non-ASCII
        "not base64 at all!",
    ],
)
def test_malformed_base64_is_an_invalid_audio_error(payload: str) -> None:
    with pytest.raises(InvalidAudio) as info:
        pcm16_to_float(payload)
    assert isinstance(info.value, ClientError)
    assert info.value.code == "invalid_audio"
    assert "base64" in info.value.message


@pytest.mark.parametrize("payload", [None, 123, 1.5, True, ["AAAA"], {"audio": "AAAA"}, b"AAAA"])
def test_non_string_payload_is_an_invalid_audio_error(payload: object) -> None:
    with pytest.raises(InvalidAudio, match="must be a base64 string"):
        pcm16_to_float(payload)  # type: ignore[arg-type]


def test_carry_longer_than_a_byte_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        pcm16_to_float("AAAA", b"\x00\x00")


def test_range_is_minus_one_to_just_below_one() -> None:
    every = np.arange(-32768, 32768, dtype="<i2").tobytes()
    samples, _ = pcm16_to_float(_b64(every))
    assert samples.min() == -1.0
    assert samples.max() == pytest.approx(32767 / 32768) and samples.max() < 1.0
    assert len(np.unique(samples)) == 65536


def test_float_round_trip_and_clipping() -> None:
    raw, expected = _known_pcm()
    assert float_to_pcm16(expected) == raw
    assert pcm16_to_float(float_to_base64(expected))[0].tolist() == expected.tolist()
    clipped, _ = pcm16_to_float(float_to_base64(np.array([2.0, -2.0, 1.0], dtype=np.float32)))
    assert clipped.tolist() == [32767 / 32768, -1.0, 32767 / 32768]
