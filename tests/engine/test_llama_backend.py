"""llama.cpp's CPU kernels as installed: this CPU's variants, the best of them loaded.

Each case runs in a fresh interpreter, since a process loads its kernels once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dragoman.cpu import cpu_info, parse_cpuinfo
from dragoman.engines.llama_backend import VARIANT_FLAGS, library_dir, variants_in
from dragoman.engines.llama_variants import build_set
from tests.engine.fresh_process import run_json

pytestmark = pytest.mark.engine

#: Loads the kernels, then answers one short question on the packaged 0.5B.
_PROBE = """
import json, sys
from pathlib import Path
from dragoman.config import LLMSettings
from dragoman.engines.llm.base import ChatMessage, ChatRequest, TextPiece
from dragoman.engines.llm.llama_cpp import create
from dragoman.engines.workers import CancelToken
engine = create(LLMSettings(), Path(sys.argv[1]))
pieces = []
request = ChatRequest(messages=(ChatMessage("user", "What is the capital of France? One word."),),
                      max_tokens=8, temperature=0.0)
engine.stream(request, CancelToken(), pieces.append)
text = "".join(p.text for p in pieces if isinstance(p, TextPiece))
print(json.dumps({"kernels": engine.describe().compute_reason, "text": text}))
engine.close()
"""


def probe(cache_dir: Path, **env: str) -> dict[str, Any]:
    return run_json(_PROBE, cache_dir, **env)


def test_the_wheel_holds_what_make_install_builds_for_this_cpu() -> None:
    # This CPU's own flags, not the effective ones: the build ignores the AVX2 caps.
    flags = parse_cpuinfo(Path("/proc/cpuinfo").read_text(encoding="utf-8"))[1]
    held = set(variants_in(library_dir()))
    assert set(build_set(flags)) <= held, sorted(held)


def test_the_best_variant_for_this_cpu_runs_the_model(cache_dir: Path) -> None:
    answer = probe(cache_dir)
    variant = next(v for v in VARIANT_FLAGS if f"llama.cpp {v} kernels" in answer["kernels"])
    assert VARIANT_FLAGS[variant] <= cpu_info().flags
    # Nothing better fits: every variant with more instructions needs one this CPU lacks.
    richer = [v for v in VARIANT_FLAGS if len(VARIANT_FLAGS[v]) > len(VARIANT_FLAGS[variant])]
    assert all(not VARIANT_FLAGS[v] <= cpu_info().flags for v in richer)
    assert "paris" in answer["text"].lower()


@pytest.mark.skipif(not cpu_info().avx2, reason="the AVX2 path needs an AVX2 CPU")
def test_the_avx2_emulation_runs_the_haswell_kernels(cache_dir: Path) -> None:
    answer = probe(cache_dir, ONEDNN_MAX_CPU_ISA="AVX2")
    assert "llama.cpp haswell kernels (best for this CPU)" in answer["kernels"]
    assert "paris" in answer["text"].lower()
