"""KV caches of recent prompts, reused across calls that share a token prefix.

A call's prompt usually extends the previous prompt of the same key (an appended
source word changes the prompt only from the end of the source on), so the keys
and values of the longest common token prefix are kept and only the rest is
computed. The last call's target tokens are kept too: beyond a new target prefix
they are a guess of the next draft, which speculation verifies in one pass.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Keys whose KV caches are kept (least recently used dropped first).
MAX_CACHED_PROMPTS = 8


@dataclass
class CacheEntry:
    #: Tokens whose keys and values `kv` holds, in order.
    ids: list[int]
    kv: Any
    #: The last call's target side: prefix tokens, then the drafted ones.
    target: list[int]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PromptCaches:
    """A transformers `DynamicCache` per key, least recently used dropped first.

    Not thread-safe: the engine that owns it serializes its calls.
    """

    def __init__(self, model_config: Any, max_entries: int = MAX_CACHED_PROMPTS) -> None:
        self._config = model_config
        self.max_entries = max(1, max_entries)
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()

    def new_kv(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self._config)
        except TypeError:  # transformers 4.x
            return DynamicCache()

    def reuse(self, key: str | None, ids: Sequence[int], target_start: int) -> tuple[Any, int, list[int]]:
        """(a KV cache holding a prefix of `ids`, that prefix's length, a guess of the draft).

        The entry of `key` is taken out; `store` puts it back. The prefix is shorter
        than the prompt: the last prompt token is always fed, since its logits give
        the first drafted token. The guess is the previous draft of this key beyond
        the new target prefix (`ids[target_start:]`), when it continues that prefix.
        """
        entry = self._entries.pop(key, None) if key is not None else None
        if entry is None:
            return self.new_kv(), 0, []
        held = int(entry.kv.get_seq_length())
        if held != len(entry.ids):
            return self.new_kv(), 0, []
        keep = min(common_prefix(entry.ids, ids), len(ids) - 1)
        if keep < held:
            entry.kv.crop(keep - held)  # negative: drop that many trailing positions
        prefix = list(ids[target_start:])
        guess = entry.target[len(prefix) :] if entry.target[: len(prefix)] == prefix else []
        return entry.kv, keep, guess

    def store(self, key: str | None, entry: CacheEntry) -> None:
        if key is None:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
