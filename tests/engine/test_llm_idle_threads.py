"""The agent's LLM on the packaged 0.5B decodes on its idle threads while nothing else computes.

Two engines share the model, one that never lends itself threads and one with
`idle_threads` above its `threads`; they must say the same greedy answers, and the second
must really switch its context's threads: up when alone, back down while another engine
call (another thread inside `ACTIVITY`) runs. Other processes' load is left out (a busy test
machine would keep the threads from ever being lent): its rule has its unit tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.config import LLMSettings
from dragoman.engines import llama_threads as idle_threads
from dragoman.engines.llm.base import ChatMessage, ChatRequest, LLMPiece, TextPiece
from dragoman.engines.llm.llama_cpp import LlamaCppEngine, create
from dragoman.engines.workers import CancelToken
from tests.engine.elsewhere import engine_call_elsewhere

pytestmark = pytest.mark.engine

MODEL = "qwen2.5-0.5b-instruct-gguf"
QUESTIONS = ("What is the capital of France?", "How many legs does a spider have?")


@pytest.fixture(autouse=True)
def _ignore_other_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_threads, "MAX_OTHERS_CORES", float("inf"))


@pytest.fixture(scope="module")
def engines(cache_dir: Path) -> Iterator[tuple[LlamaCppEngine, LlamaCppEngine]]:
    fixed = create(LLMSettings(model=MODEL, threads=1, idle_threads=0), cache_dir)
    lending = create(LLMSettings(model=MODEL, threads=1, idle_threads=2), cache_dir)
    yield fixed, lending
    fixed.close()
    lending.close()


def answer(engine: LlamaCppEngine, question: str) -> str:
    pieces: list[LLMPiece] = []
    request = ChatRequest(
        messages=(
            ChatMessage("system", "You are a helpful voice assistant. Answer in one short sentence."),
            ChatMessage("user", question),
        ),
        max_tokens=32,
    )
    finished = engine.stream(request, CancelToken(), pieces.append)
    assert finished.output_tokens > 0
    return "".join(p.text for p in pieces if isinstance(p, TextPiece))


def test_borrowed_threads_say_the_same_greedy_answer(engines: tuple[LlamaCppEngine, LlamaCppEngine]) -> None:
    fixed, lending = engines
    for question in QUESTIONS:
        alone = answer(fixed, question)
        lent = answer(lending, question)
        assert lent == alone and alone.strip(), (question, alone, lent)
    assert fixed._runtime.idle.switches == 0  # idle_threads 0: never touched
    assert fixed._runtime.context_threads == (1, 1)
    assert "2 while no other engine computes" in lending.describe().compute_reason


def test_the_threads_follow_other_engine_calls(engines: tuple[LlamaCppEngine, LlamaCppEngine]) -> None:
    _, lending = engines
    idle = lending._runtime.idle
    answer(lending, QUESTIONS[0])
    assert idle.now == 2 and lending._runtime.context_threads == (2, 2)  # alone: the spare core lent

    with engine_call_elsewhere():
        switches = idle.switches
        busy_answer = answer(lending, QUESTIONS[0])
        assert idle.now == 1 and idle.switches == switches + 1  # given back at its first decode
        assert lending._runtime.context_threads == (1, 1)
    assert "Paris" in busy_answer, busy_answer
    answer(lending, QUESTIONS[1])
    assert idle.now == 2 and lending._runtime.context_threads == (2, 2)
