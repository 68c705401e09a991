"""The MT engine and the agent's LLM on one GGUF: the model loads once, each engine keeps its own context.

Both run the packaged 0.5B here (the smallest model that both engines load by name); the
server shares the 1.5B the same way when `auto` picks it for both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.config import LLMSettings, MTSettings
from dragoman.engines import llama_models
from dragoman.engines.llm.base import ChatMessage, ChatRequest, LLMPiece, TextPiece
from dragoman.engines.llm.llama_cpp import create as create_llm
from dragoman.engines.mt.base import DraftMode, MTRequest
from dragoman.engines.mt.qwen_llama import create as create_mt
from dragoman.engines.workers import CancelToken

pytestmark = pytest.mark.engine

MODEL = "qwen2.5-0.5b-instruct-gguf"


def test_two_engines_one_model_load(cache_dir: Path) -> None:
    before = llama_models.MODELS.loads
    mt = create_mt(MTSettings(model=MODEL, threads=1, lanes=1), cache_dir)
    llm = create_llm(LLMSettings(model=MODEL, threads=1), cache_dir)
    try:
        assert llama_models.MODELS.loads == before + 1  # the LLM found the MT engine's model
        # Each still works on its own context, one after the other and in turn.
        pieces: list[LLMPiece] = []
        request = ChatRequest(
            messages=(
                ChatMessage("system", "Answer in one short sentence."),
                ChatMessage("user", "What is the capital of France?"),
            ),
            max_tokens=24,
        )
        finished = llm.stream(request, CancelToken(), pieces.append)
        answer = "".join(p.text for p in pieces if isinstance(p, TextPiece))
        assert finished.reason == "stop" and "Paris" in answer, answer
        draft = mt.draft(MTRequest("en", "de", ["Good", "morning,", "my", "friend."], mode=DraftMode.FINAL))
        german = mt.decode(draft.token_ids)
        assert draft.finished and "Freund" in german, german
    finally:
        llm.close()
        # The model outlives the first engine that lets it go.
        mt.draft(MTRequest("en", "de", ["Thank", "you."], mode=DraftMode.FINAL))
        mt.close()
