"""On an AMX CPU the packaged Q4_K_M model is converted once for the AMX kernels
(`engines/llama_amx.py`), and the copy is the same model: its next-token distributions match
the source's. Each case runs in a fresh interpreter, since a process loads its kernels once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dragoman.cpu import cpu_info
from dragoman.engines.llama_backend import library_dir, variants_in
from tests.engine.fresh_process import run_json

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not cpu_info().amx or "sapphirerapids" not in variants_in(library_dir()),
        reason="the AMX kernels need a CPU with AMX and a wheel that holds them",
    ),
]

#: Converts the 0.5B (if not yet), then scores one translation with the copy and the source.
_PROBE = """
import json, sys
from pathlib import Path
import gguf, llama_cpp, numpy as np
from dragoman.engines.llama_amx import weights_for_kernels
from dragoman.weights import gguf_file, resolve
cache = Path(sys.argv[1])
source = gguf_file(resolve("qwen2.5-0.5b-instruct-gguf", cache))
copy = weights_for_kernels(source, cache)
prompt = ("<|im_start|>user\\nTranslate into German: The cabbage juice changes colour depending on "
          "how acidic the chemical is.<|im_end|>\\n<|im_start|>assistant\\nDer Kohlsaft ändert seine "
          "Farbe je nachdem, wie sauer die Chemikalie ist.")
def log_probs(path):
    model = llama_cpp.Llama(str(path), n_threads=2, n_ctx=256, logits_all=True, verbose=False)
    tokens = model.tokenize(prompt.encode(), special=True)
    model.eval(tokens)
    scores = np.array(model.scores[: len(tokens)], dtype=np.float64)
    scores -= scores.max(-1, keepdims=True)
    return scores - np.log(np.exp(scores).sum(-1, keepdims=True))
field = gguf.GGUFReader(copy).get_field("general.file_type")
answer = {"source": str(source), "copy": str(copy), "file_type": field.contents()}
if copy != source:
    a, b = log_probs(source), log_probs(copy)
    kl = (np.exp(a) * (a - b)).sum(-1)
    answer |= {"kl_mean": float(kl.mean()), "top1": float((a.argmax(-1) == b.argmax(-1)).mean())}
print(json.dumps(answer))
"""


def probe(cache_dir: Path, **env: str) -> dict[str, Any]:
    return run_json(_PROBE, cache_dir, **env)


def test_the_q8_0_copy_is_the_same_model(cache_dir: Path) -> None:
    answer = probe(cache_dir)
    copy = Path(answer["copy"])
    assert copy.parent == cache_dir / "llama-amx" and copy.exists()
    assert answer["file_type"] == 7  # llama.cpp's MOSTLY_Q8_0
    # Q8_0 holds each Q4_K_M weight to its 8-bit grid: the distributions barely move (a broken
    # conversion, or 4-bit weights, moves them an order of magnitude more).
    assert answer["kl_mean"] < 0.01
    assert answer["top1"] > 0.9


def test_keep_loads_the_source(cache_dir: Path) -> None:
    answer = probe(cache_dir, DRAGOMAN_LLAMA_AMX_WEIGHTS="keep")
    assert answer["copy"] == answer["source"]
    assert answer["file_type"] == 15  # llama.cpp's MOSTLY_Q4_K_M, as packaged


#: The LLM, then Whisper (CTranslate2: oneDNN) and Kokoro (onnxruntime: MLAS), both of which run
#: AMX kernels of their own on an AMX CPU, then the LLM again, all on this one thread.
_SHARED_THREAD = """
import json, sys
from pathlib import Path
import numpy as np
from dragoman.config import ASRSettings, LLMSettings, TTSSettings
from dragoman.engines.asr.base import StepRequest
from dragoman.engines.llm.base import ChatMessage, ChatRequest, TextPiece
from dragoman.engines.llm.llama_cpp import create
from dragoman.engines.registry import create_asr_engine, create_tts_engine
from dragoman.engines.tts.base import SpeechRequest
from dragoman.engines.tts.voices import KOKORO
from dragoman.engines.workers import CancelToken
cache = Path(sys.argv[1])
llm = create(LLMSettings(model="qwen2.5-0.5b-instruct-gguf"), cache)
def ask():
    pieces = []
    request = ChatRequest(messages=(ChatMessage("user", "What is the capital of France? One word."),),
                          max_tokens=8, temperature=0.0)
    llm.stream(request, CancelToken(), pieces.append)
    return "".join(p.text for p in pieces if isinstance(p, TextPiece))
first = ask()
tts = create_tts_engine(TTSSettings(), cache, KOKORO)
chunks = []
tts.synthesize(SpeechRequest("Ciao a tutti.", "im_nicola", 1.0), CancelToken(), chunks.append)
asr = create_asr_engine(ASRSettings(model="whisper-base"), cache)
asr.transcribe_batch([StepRequest(np.zeros(16000, dtype=np.float32), language="en")])
print(json.dumps({"kernels": llm.describe().compute_reason, "first": first, "again": ask()}))
"""


def test_the_amx_kernels_run_after_other_libraries_amx_on_the_same_thread(cache_dir: Path) -> None:
    # ggml as released configures a thread's tiles once; oneDNN and MLAS leave theirs (or none)
    # behind, and the next product faulted with SIGILL (scripts/build_llama_wheel.py).
    answer = run_json(_SHARED_THREAD, cache_dir)
    assert "sapphirerapids" in answer["kernels"]
    assert "paris" in answer["first"].lower() and answer["again"] == answer["first"]
