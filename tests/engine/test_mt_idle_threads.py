"""The MT engine (qwen-llama, the packaged 0.5B) drafts on its idle threads while nothing else computes.

Two engines on the same GGUF, one that never lends itself threads and one with
`idle_threads` above its `threads`, must give the same greedy drafts with the same
alignment-head attention, and the second must really switch its context's threads: up
when alone, back down while another engine call (another thread inside `ACTIVITY`) runs,
as the interpreter's speech front does between its MT drafts. Other processes' load is left
out (a busy test machine would keep the threads from ever being lent): its rule has its
unit tests (tests/unit/test_idle_threads.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dragoman.config import MTSettings
from dragoman.engines import llama_threads
from dragoman.engines.mt.base import DraftMode, MTDraft, MTRequest
from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine, create
from tests.engine.elsewhere import engine_call_elsewhere

pytestmark = pytest.mark.engine

SENTENCE = "The committee said on Monday that the new rules will take effect next year"
SOURCE = SENTENCE.split(" ")


@pytest.fixture(autouse=True)
def _ignore_other_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_threads, "MAX_OTHERS_CORES", float("inf"))


@pytest.fixture(scope="module")
def engines(cache_dir: Path) -> Iterator[tuple[QwenLlamaMTEngine, QwenLlamaMTEngine]]:
    settings = MTSettings(backend="qwen-llama", preset="fast", threads=1, lanes=1)
    fixed = create(settings.model_copy(update={"idle_threads": 0}), cache_dir)
    lending = create(settings.model_copy(update={"idle_threads": 2}), cache_dir)
    assert isinstance(fixed, QwenLlamaMTEngine) and isinstance(lending, QwenLlamaMTEngine)
    yield fixed, lending
    fixed.close()
    lending.close()


def draft(engine: QwenLlamaMTEngine, words: list[str], key: str) -> MTDraft:
    """A partial draft over `words` (AlignAtt's attention included), cold: no cache to reuse."""
    engine.clear_cache()
    return engine.draft(
        MTRequest("en", "de", words, max_new_tokens=16, cache_key=key, mode=DraftMode.PARTIAL)
    )


def test_borrowed_threads_draft_the_same_tokens_and_attention(
    engines: tuple[QwenLlamaMTEngine, QwenLlamaMTEngine],
) -> None:
    fixed, lending = engines
    for words in (SOURCE[:6], SOURCE):
        alone, lent = draft(fixed, words, "fixed"), draft(lending, words, "lending")
        said = (fixed.decode(alone.token_ids), fixed.decode(lent.token_ids))
        assert alone.token_ids and lent.token_ids == alone.token_ids, said
        assert alone.attention is not None and lent.attention is not None
        np.testing.assert_allclose(lent.attention, alone.attention, atol=1e-3)
    assert fixed._ctx.idle.switches == 0  # idle_threads 0: never touched
    assert fixed._ctx._context.threads == (1, 1)
    assert "2 while no other engine computes" in lending.describe().compute_reason


def test_the_threads_follow_other_engine_calls(engines: tuple[QwenLlamaMTEngine, QwenLlamaMTEngine]) -> None:
    _, lending = engines
    idle = lending._ctx.idle
    alone = draft(lending, SOURCE, "lending")
    assert idle.now == 2 and lending._ctx._context.threads == (2, 2)  # alone: the spare core lent

    with engine_call_elsewhere():
        switches = idle.switches
        busy = draft(lending, SOURCE, "lending")
        assert idle.now == 1 and idle.switches == switches + 1  # given back at its first decode
        assert lending._ctx._context.threads == (1, 1)
    assert busy.token_ids == alone.token_ids
    draft(lending, SOURCE[:6], "lending")
    assert idle.now == 2 and lending._ctx._context.threads == (2, 2)


def test_the_speed_probe_measures_the_threads_mt_is_sure_to_have(
    engines: tuple[QwenLlamaMTEngine, QwenLlamaMTEngine],
) -> None:
    _, lending = engines
    draft(lending, SOURCE[:4], "lending")
    assert lending._ctx.idle.now == 2  # alone: the spare core lent
    seen: list[int] = []
    real = lending._ctx._context.set_threads

    def spy(threads: int) -> None:
        seen.append(threads)
        real(threads)

    lending._ctx.idle._set_threads = spy
    try:
        sample = lending.measure_speed()
    finally:
        lending._ctx.idle._set_threads = real
    # `auto` measured on MT's own thread: its first decode gave the spare core back.
    assert sample.threads == 1 and seen == [1] and lending._ctx.idle.now == 1, (sample, seen)
