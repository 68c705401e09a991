"""A deterministic word-for-word "translator" with one-hot attention, for the MT unit tests and
the benchmarks' own tests (bench/tests), which share it here rather than import each other.

Each source word maps to a target word through `LEXICON` (unknown words are upper-
cased); target word i attends only to source word i. Tokens are UTF-8 byte pieces,
so a word can be split inside a multi-byte character (`SPLITS`), and `decode`
ends in U+FFFD exactly where a real byte-level tokenizer's would.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dragoman.engines.mt.base import DraftMode, MTCapabilities, MTDraft, MTEngine, MTRequest, nothing_drafted

LEXICON = {
    "Hello": "Hallo",
    "world,": "Welt,",
    "how": "wie",
    "are": "geht",
    "you?": "es?",
    "greetings": "Grüße",
    "big": "große",
    "street": "Straße",
    "the": "die",
    "house": "Haus",
    "is": "ist",
    "red.": "rot.",
}

#: Target words drafted as several tokens (byte pieces); "ü" is b"\xc3\xbc".
SPLITS: dict[str, list[bytes]] = {
    "Grüße": [b"Gr", b"\xc3", b"\xbc\xc3\x9f", b"e"],
    "Straße": [b"Stra", b"\xc3\x9fe"],
}


def target_words(source: Sequence[str]) -> list[str]:
    return [LEXICON.get(word, word.upper()) for word in source]


class FakeEngine(MTEngine):
    name = "fake-lexicon"
    capabilities = MTCapabilities(attention=True, prompt_context=False, kv_reuse=False, frontier_stop=True)

    def __init__(self, directions: Sequence[str] = ("en-de", "en-it", "en-zh")) -> None:
        self._directions = sorted(directions)
        self._pieces: list[bytes] = []
        self._ids: dict[bytes, int] = {}
        self.requests: list[MTRequest] = []
        #: The PREFILL requests (no draft: a real engine computes a prompt head).
        self.prefills: list[MTRequest] = []
        self.forgotten: list[str] = []
        #: Exceptions raised by the next draft calls, in order.
        self.failures: list[BaseException] = []

    def directions(self) -> list[str]:
        return list(self._directions)

    def _id(self, piece: bytes) -> int:
        if piece not in self._ids:
            self._ids[piece] = len(self._pieces)
            self._pieces.append(piece)
        return self._ids[piece]

    def tokens_of(self, word: str, first: bool) -> list[int]:
        pieces = list(SPLITS.get(word, [word.encode()]))
        if not first:
            pieces[0] = b" " + pieces[0]
        return [self._id(piece) for piece in pieces]

    def draft(self, request: MTRequest) -> MTDraft:
        if request.mode is DraftMode.PREFILL:
            self.prefills.append(request)
            return nothing_drafted()
        self.requests.append(request)
        if self.failures:
            raise self.failures.pop(0)
        words = target_words(request.source_words)
        done = len(request.target_prefix.split())
        ids: list[int] = []
        rows: list[int] = []
        budget = request.max_new_tokens if request.mode is DraftMode.PARTIAL else 10_000
        for index in range(done, len(words)):
            for token in self.tokens_of(words[index], first=index == 0):
                ids.append(token)
                rows.append(index)
        if request.mode is DraftMode.PARTIAL and request.frontier_word is not None:
            # Like the real engine: end soon after the first token past the frontier.
            beyond = next((i for i, row in enumerate(rows) if row >= request.frontier_word), None)
            if beyond is not None:
                budget = min(budget, beyond + 1 + request.past_frontier_tokens)
        finished = len(ids) <= budget
        ids, rows = ids[:budget], rows[:budget]
        attention = None
        if request.mode is not DraftMode.FINAL:
            attention = np.zeros((len(ids), len(request.source_words)), dtype=np.float32)
            for row, column in enumerate(rows):
                attention[row, column] = 1.0
        if request.on_pass is not None:  # as a token-by-token engine: the draft after each token
            for count in range(1, len(ids)):
                so_far = None if attention is None else attention[:count]
                request.on_pass(MTDraft(ids[:count], so_far, finished=False))
        return MTDraft(ids, attention, finished=finished, computed_tokens=len(ids))

    def decode(self, token_ids: Sequence[int]) -> str:
        return b"".join(self._pieces[i] for i in token_ids).decode("utf-8", errors="replace")

    def forget(self, cache_key: str) -> None:
        self.forgotten.append(cache_key)
