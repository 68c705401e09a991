"""Conversations' KV caches, kept between turns: an LRU of snapshots, bounded in count and bytes.

The embedded engine holds one llama.cpp sequence and swaps conversations in and out
of it: at the end of a turn it copies the sequence's keys and values out
(`llama_state_seq_get_data`), and when the conversation speaks again it puts them
back, then prefills only the tokens past the longest common prefix. Measured on 2
cores with the 0.5B: the copy takes about 4 ms out and 1 ms back in for 440 tokens
(5.4 MB, 12 KB a token), against 3 s to prefill them again; a multi-sequence
context would switch for free but reserves the whole context for every
conversation up front, where a snapshot holds only the tokens it has.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Snapshot:
    #: The tokens whose keys and values `data` holds, at positions 0..len-1.
    tokens: tuple[int, ...]
    data: bytearray

    @property
    def size(self) -> int:
        return len(self.data)


class ConversationCache:
    """Snapshots by conversation key; the least recently used go first when a bound is passed."""

    def __init__(self, max_conversations: int, max_bytes: int) -> None:
        if max_conversations < 0 or max_bytes < 0:
            raise ValueError("cache bounds must not be negative")
        self.max_conversations = max_conversations
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Snapshot] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> Snapshot | None:
        snapshot = self._items.get(key)
        if snapshot is not None:
            self._items.move_to_end(key)
        return snapshot

    def put(self, key: str, snapshot: Snapshot) -> list[str]:
        """Keep `snapshot` as the newest; returns the keys evicted to stay within bounds."""
        self.forget(key)
        if snapshot.size > self.max_bytes or self.max_conversations == 0:
            return [key]  # too big to keep at all
        self._items[key] = snapshot
        self._bytes += snapshot.size
        evicted = []
        while len(self._items) > self.max_conversations or self._bytes > self.max_bytes:
            oldest, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.size
            evicted.append(oldest)
        return evicted

    def forget(self, key: str) -> bool:
        snapshot = self._items.pop(key, None)
        if snapshot is None:
            return False
        self._bytes -= snapshot.size
        return True

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
