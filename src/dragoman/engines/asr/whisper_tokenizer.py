"""Whisper's tokenizer for the CTranslate2 engine: plain text to tokens and back, and the
ids of its special tokens.

It is read from the model folder's tokenizer.json with the `tokenizers` library
(imported when a tokenizer is made), after putting back a BPE merge that some packaged
tokenizer.json files lost (`_repair_merges`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dragoman.errors import ModelUnavailable


class WhisperTokenizer:
    """Plain-text side of Whisper's tokenizer (no special tokens), a `TextTokenizer`."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_str(_repair_merges(path.read_text(encoding="utf-8")))

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tok.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self._tok.decode(list(ids), skip_special_tokens=True)
        return text

    def token_id(self, token: str) -> int:
        found = self._tok.token_to_id(token)
        if found is None:
            raise ModelUnavailable(f"the Whisper tokenizer has no {token} token")
        return int(found)

    def id_to_token(self, token_id: int) -> str | None:
        token: str | None = self._tok.id_to_token(token_id)
        return token


#: GPT-2's first BPE merge, which builds the " t" of " the", " to", " that", ...
_FIRST_MERGE = "Ġ t"


def _repair_merges(tokenizer_json: str) -> str:
    """Put back GPT-2's first merge when a tokenizer.json lost it.

    The packaged whisper-base tokenizer.json has 49,999 merges, missing "Ġ t"
    (tiny.en's has all 50,000). Decoding is unaffected, but encoding then splits
    every word that starts with " t" into "Ġ" + "the", token sequences the model
    never produces: a stable prefix ending in a lone "Ġ" sent the decoder into a
    loop of underscores. The merge is restored only when its result is in the vocabulary.
    """
    data = json.loads(tokenizer_json)
    model = data.get("model", {})
    merges = model.get("merges")
    if not isinstance(merges, list) or "Ġt" not in model.get("vocab", {}):
        return tokenizer_json
    as_pairs = bool(merges) and isinstance(merges[0], list)
    first: Any = _FIRST_MERGE.split(" ") if as_pairs else _FIRST_MERGE
    if first in merges:
        return tokenizer_json
    model["merges"] = [first, *merges]
    return json.dumps(data)
