"""Moonshine's tokenizer.bin reader and its SentencePiece BPE, on a small hand-made vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.engines.asr.moonshine_tokenizer import MoonshineTokenizer
from dragoman.errors import ModelUnavailable

SPACE = "\u2581"


def _write(path: Path, pieces: list[bytes]) -> Path:
    data = bytearray()
    for piece in pieces:
        n = len(piece)
        # One length byte, or two past 127: the low 7 bits with the high bit set, then n // 128.
        data += bytes([n]) if n < 128 else bytes([128 + n % 128, n // 128])
        data += piece
    path.write_bytes(bytes(data))
    return path


def _vocab(tmp_path: Path, merged: list[str]) -> MoonshineTokenizer:
    pieces = [b"<unk>", b"<s>", b"</s>", *(bytes([b]) for b in range(256))]
    pieces += [p.encode() for p in merged]
    return MoonshineTokenizer(_write(tmp_path / "tokenizer.bin", pieces))


def test_merges_in_id_order_within_words(tmp_path: Path) -> None:
    # Ids 259.. in this order: "▁t" merges before "he", so "▁the" is "▁t" + "he" -> "▁the".
    merged = [f"{SPACE}t", "he", f"{SPACE}the", "h", "e", "t", SPACE, "x", "a"]
    tok = _vocab(tmp_path, merged)
    ids = tok.encode(" the")
    assert ids == [259 + merged.index(f"{SPACE}the")]
    assert tok.decode(ids) == " the"
    # Pieces never cross a word boundary: " the the" is two "▁the".
    assert tok.encode(" the the") == ids * 2


def test_unknown_characters_fall_back_to_bytes(tmp_path: Path) -> None:
    tok = _vocab(tmp_path, [SPACE, "a"])
    ids = tok.encode(" aé")
    assert ids[:2] == [259, 260]
    assert ids[2:] == [3 + b for b in "é".encode()]
    assert tok.decode(ids) == " aé"
    # Special tokens (<unk>, <s>, </s>) decode to nothing.
    assert tok.decode([1, *ids, 2]) == " aé"


def test_long_pieces_use_two_length_bytes(tmp_path: Path) -> None:
    long = "b" * 200
    tok = _vocab(tmp_path, ["b", long])
    assert tok.decode([260]) == long
    assert tok.vocab_size == 259 + 2


def test_a_file_that_is_not_a_vocabulary_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.bin"
    path.write_bytes(b"\x05<unk>\x03<s>")
    with pytest.raises(ModelUnavailable):
        MoonshineTokenizer(path)
