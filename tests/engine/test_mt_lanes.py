"""MT lanes on the packaged 0.5B: contexts of one model that draft two sessions at once.

Each lane is a llama.cpp context of its own on the shared weights; a draft must not
depend on which lane made it or on what the other lane computes meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt.base import DraftMode, MTDraft, MTRequest
from dragoman.engines.mt.lanes import MTLanes
from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine, create

pytestmark = pytest.mark.engine

SOURCES = {
    key: sentence.split(" ")
    for key, sentence in (
        ("a", "The committee said on Monday that the new rules will take effect next year"),
        ("b", "Scientists found water on the surface of the moon in several craters"),
    )
}


@pytest.fixture(scope="module")
def lanes(cache_dir: Path) -> Iterator[MTLanes]:
    built = create(MTSettings(backend="qwen-llama", preset="fast", threads=1, lanes=2), cache_dir)
    assert isinstance(built, MTLanes)
    yield built
    built.close()


def requests(key: str) -> list[MTRequest]:
    """A session's drafts as the policy sends them: the source growing, then the final pass."""
    words = SOURCES[key]
    partials = [
        MTRequest("en", "de", words[:n], max_new_tokens=12, cache_key=key, frontier_word=n - 1)
        for n in (4, 8)
    ]
    return [*partials, MTRequest("en", "de", words, mode=DraftMode.FINAL, cache_key=key)]


def test_two_lanes_share_the_model_and_describe_themselves(lanes: MTLanes) -> None:
    first, second = lanes.lanes
    assert isinstance(first, QwenLlamaMTEngine) and isinstance(second, QwenLlamaMTEngine)
    assert first.model_path == second.model_path and first.threads == second.threads == 1
    assert first.scripts is second.scripts  # one vocabulary: its masks are built once
    assert lanes.capabilities.parallel_calls == 2
    assert lanes.describe().compute_reason.endswith(", 2 lanes")
    assert lanes.directions() == first.directions()


def test_drafts_at_once_on_two_lanes_are_those_made_one_after_the_other(lanes: MTLanes) -> None:
    alone = {key: [lanes.draft(r).token_ids for r in requests(key)] for key in SOURCES}
    assert {lanes.lane_of(key) for key in SOURCES} == {0, 1}
    for key in SOURCES:
        lanes.forget(key)
    together: dict[str, list[list[int]]] = {}
    barrier = threading.Barrier(2)

    def session(key: str) -> None:
        barrier.wait()
        drafts: list[MTDraft] = [lanes.draft(r) for r in requests(key)]
        together[key] = [d.token_ids for d in drafts]

    threads = [threading.Thread(target=session, args=(key,)) for key in SOURCES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert together == alone
    final = lanes.decode(together["a"][-1])
    assert "Regeln" in final, final  # "rules": German, of this sentence
