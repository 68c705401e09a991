"""The int8 linear layers of the PyTorch engines, on small random layers (no model)."""

from __future__ import annotations

import pytest
import torch

from dragoman.engines.torch_lm.int8 import Int8Linear, int8_matmul_is_exact, quantize_linear_int8
from dragoman.engines.torch_lm.load import normalize_compute_type
from dragoman.errors import ConfigError


@pytest.fixture(autouse=True)
def exact_int8_products(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact product `torch._int_mm` computes where int8 is used (VNNI or AMX).

    Without those instructions the kernel saturates and dragoman refuses int8 (see
    test_cpu.py), so on such a CPU these tests check the layer with the exact product.
    """
    if not int8_matmul_is_exact():
        monkeypatch.setattr(torch, "_int_mm", lambda a, b: a.int() @ b.int())


def _layer(seed: int = 0, bias: bool = True) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(64, 48, bias=bias)


def test_int8_linear_stays_close_to_the_float_layer() -> None:
    layer = _layer()
    x = torch.randn(5, 7, 64)
    expected = layer(x)
    got = Int8Linear(layer)(x)
    assert got.shape == expected.shape == (5, 7, 48)
    error = (got - expected).abs().max().item()
    assert 0 < error < 0.02 * expected.abs().max().item(), error


def test_every_row_is_independent_of_the_rest_of_its_pass() -> None:
    # A large row (an attention sink's activations) must not coarsen the others:
    # the reason for per-token scales (KV reuse and speculation rely on it).
    layer = Int8Linear(_layer(bias=False))
    rows = torch.randn(6, 64)
    rows[0] *= 1000.0
    together = layer(rows)
    alone = torch.cat([layer(rows[i : i + 1]) for i in range(len(rows))])
    assert torch.equal(together, alone)


def test_quantize_replaces_every_linear_layer() -> None:
    model = torch.nn.Sequential(_layer(1), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(48, 8)))
    x = torch.randn(3, 64)
    before = model(x)
    quantize_linear_int8(model)
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    assert sum(isinstance(m, Int8Linear) for m in model.modules()) == 2
    assert torch.allclose(model(x), before, atol=0.05)


@pytest.mark.parametrize(
    ("given", "expected"),
    [("int8", "int8"), ("BF16", "bfloat16"), ("fp32", "float32"), ("AUTO", "auto"), ("default", "auto")],
)
def test_compute_type_names(given: str, expected: str) -> None:
    assert normalize_compute_type(given) == expected


def test_an_unknown_compute_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="int8"):
        normalize_compute_type("int4")
