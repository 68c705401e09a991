"""Int8 linear layers for a PyTorch causal LM on a CPU.

Decoding is one forward pass per token, and on a CPU each pass is bound by
reading the weights. `Int8Linear` holds int8 weights with one scale per output
channel, quantises the activations on the fly with one scale per token, and
multiplies with `torch._int_mm` (the int8 GEMM that torchao builds on). On one
thread of this machine a one-token pass of the Qwen2.5-0.5B MT model took 48 ms
against 86 ms in bf16, a 25-token prefill 86 ms against 119 ms. The packaged
weights are a 4-bit GGUF to begin with, so the 8-bit weight grid loses little;
bench/RESULTS.md compares the translations.

Why not `torch.ao.quantization.quantize_dynamic`: it took 26 ms per token, but it
quantises a whole input with one scale, so a token's result depends on the other
tokens of the same pass (the attention sink's large activations set the scale of
a whole prefill). A cached prefix then computes differently from a cold prompt,
and speculation's verification pass disagrees with the token-by-token draft.
Per-token scales and exact integer accumulation make every row independent of
the others, so KV reuse changes nothing. torchao's int8 configs ran 5-15x slower
than either on this CPU without `torch.compile`.

`_int_mm` is exact only where the CPU has int8 dot products (VNNI or AMX).
Without them oneDNN's AVX2 kernel multiplies u8 by s8 pairs into saturating
16-bit sums: a 8x64 by 64x48 product of full-range values came out wrong by up to
26473 in 138109 under `ONEDNN_MAX_CPU_ISA=AVX2`, on top of being 8x slower than
fp32. `int8_matmul_is_exact` checks that before int8 is used.
"""

from __future__ import annotations

import functools
import time

import torch

from dragoman.logs import get_logger

log = get_logger(__name__)

_INT8_MAX = 127.0


def _quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values of each row of `x` (flattened to 2-D) and each row's scale."""
    rows = x.reshape(-1, x.shape[-1]).float()
    scale = rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / _INT8_MAX
    return (rows / scale).round_().clamp_(-_INT8_MAX, _INT8_MAX).to(torch.int8), scale


@functools.cache
def int8_matmul_is_exact() -> bool:
    """Whether `torch._int_mm` computes exact int32 sums on this CPU (see the module docstring)."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-127, 128, (17, 64), dtype=torch.int8, generator=generator)
    b = torch.randint(-127, 128, (64, 48), dtype=torch.int8, generator=generator)
    return torch.equal(torch._int_mm(a, b), a.int() @ b.int())


class Int8Linear(torch.nn.Module):
    """y = x W^T + b with W in int8 per output channel and x in int8 per token."""

    weight_t: torch.Tensor
    weight_scale: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        quantized, scale = _quantize_rows(linear.weight.detach())
        # [in, out], contiguous: the layout torch._int_mm multiplies fastest.
        self.register_buffer("weight_t", quantized.t().contiguous())
        self.register_buffer("weight_scale", scale.reshape(-1))
        bias = None if linear.bias is None else linear.bias.detach().float()
        self.register_buffer("bias", bias)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values, scale = _quantize_rows(x)
        out = torch._int_mm(values, self.weight_t).float() * scale * self.weight_scale
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


def quantize_linear_int8(model: torch.nn.Module) -> torch.nn.Module:
    """Replace every nn.Linear of `model` in place with an Int8Linear (the lm_head included)."""
    started = time.perf_counter()
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, torch.nn.Linear)
    ]
    for parent, name, child in targets:
        setattr(parent, name, Int8Linear(child))
    log.info("model quantised to int8", layers=len(targets), seconds=round(time.perf_counter() - started, 2))
    return model
