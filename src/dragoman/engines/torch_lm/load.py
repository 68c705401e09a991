"""Loading the Qwen MT model into PyTorch at a compute type.

Decoding a draft is one forward pass per token, and on a CPU each pass is bound by
reading the weights. So the default compute type, `int8`, replaces every linear
layer (the lm_head included) with `Int8Linear`: int8 weights with one scale per
output channel, and activations quantised on the fly with one scale per token,
multiplied with `torch._int_mm` (the int8 GEMM that torchao builds on). On one
thread of this machine a one-token pass took 48 ms against 86 ms in bf16, a
25-token prefill 86 ms against 119 ms. The packaged weights are a 4-bit GGUF to
begin with, so the 8-bit weight grid loses little; bench/RESULTS.md compares the
translations.

Why not `torch.ao.quantization.quantize_dynamic`: it took 26 ms per token, but it
quantises a whole input with one scale, so a token's result depends on the other
tokens of the same pass (the attention sink's large activations set the scale of
a whole prefill). A cached prefix then computes differently from a cold prompt,
and speculation's verification pass disagrees with the token-by-token draft.
Per-token scales and exact integer accumulation make every row independent of
the others, so KV reuse changes nothing. torchao's int8 configs ran 5-15x slower
than either on this CPU without `torch.compile`.

The attention stays in float (eager, for the alignment heads' weights).

`auto`, the default, chooses per CPU. `_int_mm` is fast only where the CPU has
int8 dot-product instructions: on an AVX2-only AMD EPYC an 8x896 by 896x4864
product took 30 ms in int8 against 3.6 ms in fp32, and updates 4-9 s against
0.4-0.8 s. So `auto` takes int8 only on a CPU with VNNI or AMX, and only when a
short measurement of the model's own product shape at load confirms it beats
fp32; fp32 otherwise. bf16 is never chosen: it is slow where the CPU has no native
bf16 (33 ms for that product under AVX2), and a batched bf16 pass can resolve a
near-tie differently from a token-by-token one, so it is not exact under KV reuse.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dragoman.cpu import CPUInfo, available_cores, cpu_info
from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: compute_type -> the dtype of everything that is not an int8 linear layer.
COMPUTE_TYPES = {"int8": torch.float32, "bfloat16": torch.bfloat16, "float32": torch.float32}
AUTO = "auto"
_ALIASES = {"bf16": "bfloat16", "fp32": "float32", "default": AUTO}
_INT8_MAX = 127.0
#: int8 must beat fp32 by this factor in the load-time measurement to be chosen.
_INT8_MARGIN = 0.9


def default_threads() -> int:
    """Half the cores, at least one: the MT engine shares the CPU with the ASR engine.

    Measured on 2 shared cores: with other processes busy, 2 torch threads decoded
    at 0.3 tok/s (OpenMP threads spinning against each other) and 1 thread at 7.6.
    """
    return max(1, available_cores() // 2)


def normalize_compute_type(compute_type: str) -> str:
    """A compute type's canonical name: `auto`, or one of COMPUTE_TYPES."""
    name = _ALIASES.get(compute_type.lower(), compute_type.lower())
    if name != AUTO and name not in COMPUTE_TYPES:
        raise ConfigError(
            f"unsupported compute type {compute_type!r} for the qwen-torch MT backend; "
            f"choose auto or one of {', '.join(COMPUTE_TYPES)}"
        )
    return name


@dataclass(frozen=True)
class ComputeChoice:
    """The compute type an engine runs at, and why (logged, and shown in /health)."""

    compute_type: str
    reason: str


def choose_compute_type(
    requested: str, *, shape: tuple[int, int] = (896, 4864), cpu: CPUInfo | None = None
) -> ComputeChoice:
    """Resolve `requested` (`auto` or a compute type) for this CPU.

    `shape` is (in, out) of the model's widest linear layer, measured for `auto`.
    """
    name = normalize_compute_type(requested)
    cpu = cpu or cpu_info()
    has_int8 = cpu.vnni or cpu.amx
    if name != AUTO:
        if name == "int8" and not has_int8:
            log.warning("int8 requested on a CPU without VNNI or AMX: expect it slower than float32")
        return ComputeChoice(name, "requested")
    if not has_int8:
        return ComputeChoice("float32", "no VNNI or AMX: int8 products are slower than float32 here")
    int8_ms, fp32_ms = measure_int8_against_fp32(*shape)
    timing = f"int8 {int8_ms:.2f} ms, float32 {fp32_ms:.2f} ms for 1+8 rows of {shape[0]}x{shape[1]}"
    if int8_ms < _INT8_MARGIN * fp32_ms:
        return ComputeChoice("int8", f"VNNI/AMX and measured faster: {timing}")
    return ComputeChoice("float32", f"int8 measured no faster: {timing}")


def measure_int8_against_fp32(inputs: int, outputs: int, repeats: int = 9) -> tuple[float, float]:
    """Median ms of a 1-row plus an 8-row pass through an inputs x outputs layer: Int8Linear, fp32.

    One row is a decoded token, eight a short prefill; together they stand for an
    update. The layers are the engine's own, so the measurement includes the
    per-token quantisation of the activations.
    """
    torch.manual_seed(0)
    with torch.inference_mode():
        linear = torch.nn.Linear(inputs, outputs, bias=False)
        quantized = Int8Linear(linear)
        rows = [torch.randn(n, inputs) for n in (1, 8)]
        int8_ms = _median_ms(lambda: [quantized(x) for x in rows], repeats)
        fp32_ms = _median_ms(lambda: [linear(x) for x in rows], repeats)
    return int8_ms, fp32_ms


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # the first call pays for kernel selection
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def widest_linear(model_dir: Path) -> tuple[int, int]:
    """(hidden, intermediate) size of a transformers folder's MLP, from its config.json."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        return int(config["hidden_size"]), int(config["intermediate_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return 896, 4864  # Qwen2.5-0.5B's


def _quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values of each row of `x` (flattened to 2-D) and each row's scale."""
    rows = x.reshape(-1, x.shape[-1]).float()
    scale = rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / _INT8_MAX
    return (rows / scale).round_().clamp_(-_INT8_MAX, _INT8_MAX).to(torch.int8), scale


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
    """Replace every nn.Linear of `model` in place with an Int8Linear."""
    started = time.perf_counter()
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, torch.nn.Linear)
    ]
    for parent, name, child in targets:
        setattr(parent, name, Int8Linear(child))
    log.info(
        "MT model quantised to int8", layers=len(targets), seconds=round(time.perf_counter() - started, 2)
    )
    return model


def load_model(model_dir: Path, compute_type: str) -> tuple[Any, Any]:
    """(tokenizer, causal LM in eval mode with eager attention) from a transformers folder.

    `compute_type` is a resolved one (see `choose_compute_type`), not `auto`.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = normalize_compute_type(compute_type)
    if name == AUTO:
        raise ConfigError("load_model takes a resolved compute type; resolve auto first")
    auto_model: Any = AutoModelForCausalLM
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        # Eager attention: the alignment heads' weights are read from it (sdpa returns none).
        model = auto_model.from_pretrained(
            str(model_dir), dtype=COMPUTE_TYPES[name], attn_implementation="eager", local_files_only=True
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelUnavailable(f"cannot load the MT model in {model_dir}: {exc}") from exc
    model.eval()
    if name == "int8":
        quantize_linear_int8(model)
    return tokenizer, model
