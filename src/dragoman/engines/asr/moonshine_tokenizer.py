"""Moonshine's tokenizer, read from the packaged `tokenizer.bin` (the package ships no
SentencePiece model file); the engine is `engines/asr/moonshine_ort.py`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from dragoman.errors import ModelUnavailable

#: The SentencePiece word-boundary mark, a space in the text.
SPACE = "\u2581"
BOS, EOS = 1, 2
#: Token ids 3..258 are the byte-fallback tokens <0x00>..<0xFF>.
BYTE_BASE = 3


class MoonshineTokenizer:
    """Moonshine's vocabulary (Llama's 32,000 SentencePiece pieces) read from `tokenizer.bin`,
    a `TextTokenizer`.

    The file is the pieces in id order, each its byte length (one byte, or two when
    the first has its high bit set: the low 7 bits, then 128 × the second byte) and
    its UTF-8 bytes. Encoding is SentencePiece BPE: pieces never cross a word boundary,
    and the merge made first is the adjacent pair whose merged piece has the lowest id
    (SentencePiece scores a BPE piece by its merge rank, which is its id order).
    Characters the vocabulary lacks fall back to their bytes. Text maps to pieces with
    spaces as U+2581 and no dummy prefix, so `decode(encode(t)) == t`; the engine adds
    the leading space the model expects itself.
    """

    def __init__(self, path: Path) -> None:
        data = path.read_bytes()
        pieces: list[bytes] = []
        i = 0
        while i < len(data):
            n = data[i]
            i += 1
            if n >= 128:
                n = (n - 128) + 128 * data[i]
                i += 1
            pieces.append(data[i : i + n])
            i += n
        if len(pieces) < BYTE_BASE + 256 or i != len(data):
            raise ModelUnavailable(f"{path} is not a Moonshine tokenizer.bin")
        self._pieces = pieces
        self._ids: dict[str, int] = {}
        for token_id, piece in enumerate(pieces[BYTE_BASE + 256 :], start=BYTE_BASE + 256):
            self._ids.setdefault(piece.decode("utf-8", errors="replace"), token_id)
        self.vocab_size = len(pieces)
        self._encode_word = lru_cache(maxsize=8192)(self._bpe)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in words(text.replace(" ", SPACE)):
            ids.extend(self._encode_word(word))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        data = b"".join(self._pieces[i] for i in ids if EOS < i < self.vocab_size)
        return data.decode("utf-8", errors="replace").replace(SPACE, " ")

    def _bpe(self, word: str) -> tuple[int, ...]:
        symbols = list(word)
        while len(symbols) > 1:
            best: tuple[int, int] | None = None
            for k in range(len(symbols) - 1):
                merged = self._ids.get(symbols[k] + symbols[k + 1])
                if merged is not None and (best is None or merged < best[0]):
                    best = (merged, k)
            if best is None:
                break
            k = best[1]
            symbols[k : k + 2] = [symbols[k] + symbols[k + 1]]
        ids: list[int] = []
        for symbol in symbols:
            found = self._ids.get(symbol)
            if found is not None:
                ids.append(found)
            else:
                ids.extend(BYTE_BASE + b for b in symbol.encode("utf-8"))
        return tuple(ids)


def words(text: str) -> list[str]:
    """`text` cut before each word-boundary mark: SentencePiece merges never cross one."""
    words: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char == SPACE and i > start:
            words.append(text[start:i])
            start = i
    if start < len(text):
        words.append(text[start:])
    return words
