"""KV caches of recent prompts, reused across calls that share a token prefix.

A call's prompt usually extends the previous prompt of the same key (an appended
source word changes the prompt only from the end of the source on), so the keys
and values of the longest common token prefix are kept and only the rest is
computed. The last call's target tokens are kept too: beyond a new target prefix
they are a guess of the next draft of the same utterance, which speculation
verifies in one pass (`LastDraft`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Keys whose KV caches are kept (least recently used dropped first).
MAX_CACHED_PROMPTS = 8


@dataclass(frozen=True)
class LastDraft:
    """A key's last draft, as a guess of its next one."""

    #: Its prompt up to its first source token (`opening`).
    opening: tuple[int, ...]
    #: Its target side: prefix tokens, then the drafted ones.
    target: list[int]

    def guess(self, ids: Sequence[int], source_start: int, target_start: int) -> list[int]:
        """This draft beyond the new prompt's target prefix (`ids[target_start:]`), where it
        continues that prefix and translated the same utterance. The next utterance's prompt
        differs at its first source token or before (its history grew), and the translation of
        the one before is no guess of its own (it cost the next first draft ~17 tokens fed for
        nothing)."""
        if opening(ids, source_start) != self.opening:
            return []
        prefix = list(ids[target_start:])
        return self.target[len(prefix) :] if self.target[: len(prefix)] == prefix else []


def opening(ids: Sequence[int], source_start: int) -> tuple[int, ...]:
    """A prompt up to its first source token: equal for the drafts of one utterance."""
    return tuple(ids[: source_start + 1])


@dataclass
class CacheEntry:
    #: Tokens whose keys and values `kv` holds, in order.
    ids: list[int]
    kv: Any
    last: LastDraft


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

    def reuse(
        self, key: str | None, ids: Sequence[int], source_start: int, target_start: int
    ) -> tuple[Any, int, list[int]]:
        """(a KV cache holding a prefix of `ids`, that prefix's length, a guess of the draft).

        The entry of `key` is taken out; `store` puts it back. The prefix is shorter
        than the prompt: the last prompt token is always fed, since its logits give
        the first drafted token. The guess is the previous draft of this key
        (`LastDraft.guess`).
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
        return entry.kv, keep, entry.last.guess(ids, source_start, target_start)

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
