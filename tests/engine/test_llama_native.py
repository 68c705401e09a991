"""`engines.llama_native`, the one adapter to llama-cpp-python's private and low-level API,
against the pinned llama-cpp-python on the packaged Qwen2.5 0.5B.

Each call the engines make through it is checked for what they rely on: the model's facts
agree with its GGUF metadata, tokens round-trip to text, a greedy sampler picks the logits'
argmax, a saved sequence restores to the same logits, a copied sequence continues as the
original, and the eval callback's tensors have the layout the attention tap reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog

from dragoman.engines import llama_models, llama_native
from dragoman.engines.llama_native import ContextSpec, NativeContext, NativeModel, Sampler
from dragoman.errors import EngineFailure
from dragoman.weights import gguf_file, resolve

pytestmark = pytest.mark.engine

MODEL = "qwen2.5-0.5b-instruct-gguf"
TEXT = "The committee met on Tuesday to discuss the new budget, and most members agreed."


@pytest.fixture(scope="module")
def model(cache_dir: Path) -> Iterator[NativeModel]:
    loaded = llama_models.acquire(gguf_file(resolve(MODEL, cache_dir)))
    yield loaded
    llama_models.release(loaded)


@pytest.fixture
def context(model: NativeModel) -> Iterator[NativeContext]:
    made = NativeContext(model, ContextSpec(context_tokens=256, threads=1, sequences=2, unified_kv=True))
    yield made
    made.close()


def test_the_model_facts_agree_with_its_metadata(model: NativeModel) -> None:
    arch = model.metadata["general.architecture"]
    assert model.n_layer == int(model.metadata[f"{arch}.block_count"])
    assert model.n_head == int(model.metadata[f"{arch}.attention.head_count"])
    assert model.n_vocab > 100_000 and model.n_params > 100_000_000
    assert "tokenizer.chat_template" in model.metadata


def test_tokens_round_trip_and_special_tokens_parse(model: NativeModel) -> None:
    text = "Grüße aus Köln, 你好!"
    ids = model.tokenize(text, add_bos=False)
    assert b"".join(model.piece(t) for t in ids).decode("utf-8") == text
    [start] = model.tokenize("<|im_start|>", add_bos=False)
    [end] = model.tokenize("<|im_end|>", add_bos=False)
    assert model.piece(start) == b"" and model.token_text(start) == "<|im_start|>"
    assert model.is_eog(end) and not model.is_eog(ids[0])


def similar(a: Any, b: Any) -> bool:
    """Logits of the same row, up to the kernels' rounding (another row's correlate far less)."""
    return float(np.corrcoef(a, b)[0, 1]) > 0.999


def test_each_rows_logits_and_a_greedy_sampler(model: NativeModel, context: NativeContext) -> None:
    ids = model.tokenize(TEXT, add_bos=False)
    context.decode(ids, 0, 0, 0)  # logits of every row
    rows = [context.logits(i).copy() for i in range(len(ids))]
    sampler = Sampler(model, context, temperature=0.0, seed=0, grammar=None)
    try:
        assert sampler.sample() == int(rows[-1].argmax())
    finally:
        sampler.close()
    # Row k is the prediction after ids[:k + 1], as a decode of that prefix alone gives it.
    for k in (4, 9):
        context.clear()
        context.decode(ids[: k + 1], 0, 0, k)
        alone = context.logits(k).copy()
        assert similar(alone, rows[k]) and not similar(alone, rows[k + 1])


def test_a_banned_token_is_never_sampled(model: NativeModel, context: NativeContext) -> None:
    ids = model.tokenize(TEXT, add_bos=False)
    context.decode(ids, 0, 0, len(ids) - 1)
    best = int(context.logits(len(ids) - 1).argmax())
    sampler = Sampler(model, context, temperature=0.0, seed=0, grammar=None, banned=[best])
    try:
        assert sampler.sample() != best
    finally:
        sampler.close()


def next_logits(context: NativeContext, token: int, at: int, seq: int = 0) -> Any:
    context.decode([token], at, seq, 0)
    return context.logits(0).copy()


def test_a_saved_sequence_restores_to_the_same_logits(model: NativeModel, context: NativeContext) -> None:
    ids = model.tokenize(TEXT, add_bos=False)
    head, token = ids[:-1], ids[-1]
    context.decode(head, 0, 0, len(head) - 1)
    state = context.save(0)
    want = next_logits(context, token, len(head))
    context.clear()
    assert context.load(0, bytes(state)) and context.load(0, state)
    got = next_logits(context, token, len(head))
    assert int(got.argmax()) == int(want.argmax())
    np.testing.assert_allclose(got, want, atol=1e-3)


def test_a_copied_sequence_goes_on_as_the_original(model: NativeModel, context: NativeContext) -> None:
    ids = model.tokenize(TEXT, add_bos=False)
    head, token = ids[:-1], ids[-1]
    n = len(head)
    context.decode(head, 0, 0, n - 1)
    context.copy(0, 1, 0, n)
    want = next_logits(context, token, n)
    context.remove(0, 0)
    got = next_logits(context, token, n, seq=1)
    np.testing.assert_allclose(got, want, atol=1e-3)
    # Shifted up by two positions, the keys are re-rotated: attention depends on relative
    # positions only, so the next prediction is as it was unshifted.
    context.copy(1, 0, 0, n + 1)
    unshifted = next_logits(context, ids[0], n + 1, seq=0)
    context.remove(0, 0)
    context.shift(1, 0, -1, 2)
    shifted = next_logits(context, ids[0], n + 3, seq=1)
    assert similar(shifted, unshifted)


def test_the_node_filter_hands_over_the_selected_layers_softmaxed_attention(model: NativeModel) -> None:
    seen: dict[int, Any] = {}

    def on_computed(tensor: int) -> bool:
        name = llama_native.tensor_name(tensor)
        assert name.startswith(b"kq_soft_max-")
        layout = llama_native.tensor_layout(tensor)
        n_kv, n_tokens, n_head = layout.ne[0], layout.ne[1], layout.ne[2]
        assert layout.type == llama_native.GGML_TYPE_F32 and layout.nb[0] == 4 and layout.nb[1] == 4 * n_kv
        block = np.empty((n_head * n_tokens, n_kv), np.float32)
        llama_native.read_tensor(tensor, block, 0)
        seen[int(name.split(b"-")[1])] = block
        return True

    node_filter = llama_native.NodeFilter(b"kq_soft_max-", on_computed)
    spec = ContextSpec(context_tokens=256, threads=1, flash_attention=False)
    context = NativeContext(model, spec, node_filter)
    ids = model.tokenize(TEXT, add_bos=False)
    layers = [0, 3, model.n_layer - 1]
    try:
        node_filter.select(layers)
        context.decode(ids, 0, 0, len(ids) - 1)
        selected = dict(seen)
        seen.clear()
        node_filter.select(range(model.n_layer))
        context.remove(0, 0)
        context.decode(ids, 0, 0, len(ids) - 1)
        every = dict(seen)
        seen.clear()
        node_filter.select(())
        context.remove(0, 0)
        context.decode(ids, 0, 0, len(ids) - 1)
    finally:
        context.close()
    assert sorted(selected) == layers
    assert sorted(every) == list(range(model.n_layer))
    assert not seen
    for layer, block in every.items():
        # Each query row is a softmax over the cells: it sums to 1, and sees no later token.
        rows = block.reshape(model.n_head, len(ids), -1)
        np.testing.assert_allclose(rows.sum(axis=-1), 1.0, atol=1e-3)
        assert float(rows[:, 0, 1 : len(ids)].max()) == 0.0
        if layer in selected:
            np.testing.assert_allclose(selected[layer], block, atol=1e-5)


def test_a_node_filter_refuses_numbers_it_cannot_hold() -> None:
    node_filter = llama_native.NodeFilter(b"kq_soft_max-", lambda _tensor: True)
    with pytest.raises(ValueError, match="out of range"):
        node_filter.select([5000])
    with pytest.raises(ValueError, match="too long"):
        llama_native.NodeFilter(b"x" * 64, lambda _tensor: True)


def test_llama_cpps_own_error_reaches_the_log(model: NativeModel, context: NativeContext) -> None:
    # llama-cpp-python's handler dropped llama.cpp's errors (levels read one off); the
    # server's log now says why a decode failed, next to the EngineFailure.
    with (
        structlog.testing.capture_logs() as logged,
        pytest.raises(EngineFailure, match="llama_decode returned"),
    ):
        context.decode([model.n_vocab + 5], 0, 0, 0)
    errors = [entry for entry in logged if entry["event"] == "llama.cpp error"]
    assert errors and all(entry["log_level"] == "error" for entry in errors)
    assert any(str(model.n_vocab + 5) in entry["detail"] for entry in errors)
