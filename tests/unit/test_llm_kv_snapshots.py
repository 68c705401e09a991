"""The LRU of conversations' KV snapshots."""

from __future__ import annotations

import pytest

from dragoman.engines.llm.kv_snapshots import ConversationCache, Snapshot, common_prefix


def snap(n_tokens: int, size: int) -> Snapshot:
    return Snapshot(tuple(range(n_tokens)), bytearray(size))


def test_least_recently_used_goes_first_by_count() -> None:
    cache = ConversationCache(max_conversations=2, max_bytes=1000)
    assert cache.put("a", snap(3, 10)) == []
    assert cache.put("b", snap(3, 10)) == []
    assert cache.get("a") is not None  # a is now the newest
    assert cache.put("c", snap(3, 10)) == ["b"]
    assert "a" in cache and "c" in cache and "b" not in cache
    assert len(cache) == 2 and cache.bytes == 20


def test_bytes_bound_and_replacing() -> None:
    cache = ConversationCache(max_conversations=10, max_bytes=100)
    cache.put("a", snap(1, 60))
    cache.put("a", snap(2, 50))  # replaces, not adds
    assert cache.bytes == 50
    assert cache.put("b", snap(1, 40)) == []
    assert cache.put("c", snap(1, 30)) == ["a"]
    assert cache.bytes == 70
    assert cache.put("huge", snap(1, 101)) == ["huge"]
    assert "huge" not in cache and cache.bytes == 70


def test_forget_and_clear() -> None:
    cache = ConversationCache(max_conversations=4, max_bytes=100)
    cache.put("a", snap(1, 10))
    assert cache.forget("a") is True and cache.forget("a") is False
    assert cache.bytes == 0 and cache.get("a") is None
    cache.put("b", snap(1, 10))
    cache.clear()
    assert len(cache) == 0 and cache.bytes == 0
    with pytest.raises(ValueError):
        ConversationCache(max_conversations=-1, max_bytes=0)


def test_a_cache_of_nothing_keeps_nothing() -> None:
    cache = ConversationCache(max_conversations=0, max_bytes=100)
    assert cache.put("a", snap(1, 1)) == ["a"] and len(cache) == 0


@pytest.mark.parametrize(
    ("a", "b", "n"),
    [
        ([], [1], 0),
        ([1, 2, 3], [1, 2, 3], 3),
        ([1, 2, 3], [1, 2], 2),
        ([1, 2, 3], [1, 5, 3], 1),
        ([4], [1], 0),
    ],
)
def test_common_prefix(a: list[int], b: list[int], n: int) -> None:
    assert common_prefix(a, b) == n == common_prefix(b, a)
