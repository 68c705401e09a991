"""Loading a transformers causal LM into PyTorch at a compute type.

Compute types: `int8` replaces every linear layer with `Int8Linear`
(`engines.torch_lm.int8`, where its measurements are), `float32` and `bfloat16`
load the weights at that dtype. The attention stays in float (eager, for the
alignment heads' weights).

`auto`, the default, chooses per CPU, by what it has and what it measures. `_int_mm`
is fast only where the CPU has int8 dot-product instructions: on an AVX2-only AMD
EPYC an 8x896 by 896x4864 product took 30 ms in int8 against 3.6 ms in fp32, and
updates 4-9 s against 0.4-0.8 s. bf16 products are fast only with native bf16
(AVX-512 BF16 or AMX); emulated under AVX2 that product took 33 ms. So the
candidates are float32 always, int8 with VNNI or AMX, bfloat16 with native bf16,
and a short measurement of the model's own layer shape at load picks among them;
a candidate must beat float32 by 10% to be taken. Measured on one AMX machine
(bench/RESULTS.md): 340 ms per update in bf16, 409 in int8, 637 in fp32; under the
AVX2 caps 623 in fp32, 1862 in bf16, 3976 in int8. Neither int8 nor bf16 is
bit-exact against a differently chunked pass (a near-tie can resolve otherwise),
which KV reuse and speculation tolerate; the engine tests that compare chunkings
run fp32.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dragoman.cpu import CPUInfo, available_cores, cpu_info
from dragoman.engines.torch_lm.int8 import Int8Linear, int8_matmul_is_exact, quantize_linear_int8
from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: compute_type -> the dtype of everything that is not an int8 linear layer.
COMPUTE_TYPES = {"int8": torch.float32, "bfloat16": torch.bfloat16, "float32": torch.float32}
AUTO = "auto"
_ALIASES = {"bf16": "bfloat16", "fp32": "float32", "default": AUTO}
#: A faster compute type must beat float32 by this factor in the load-time measurement.
_MARGIN = 0.9


def default_threads() -> int:
    """Half the cores, at least one: the threads of an engine built outside the server (bench, tests).

    The server sets `threads` itself, from its CPU budget (`transports/runtime.py`).

    Measured on 2 shared cores: with other processes busy, 2 torch threads decoded
    at 0.3 tok/s (OpenMP threads spinning against each other) and 1 thread at 7.6.
    """
    return max(1, available_cores() // 2)


def normalize_compute_type(compute_type: str) -> str:
    """A compute type's canonical name: `auto`, or one of COMPUTE_TYPES."""
    name = _ALIASES.get(compute_type.lower(), compute_type.lower())
    if name != AUTO and name not in COMPUTE_TYPES:
        raise ConfigError(
            f"unsupported compute type {compute_type!r} for a PyTorch engine; "
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
    if name != AUTO:
        if name == "int8" and not int8_matmul_is_exact():
            raise ConfigError(
                "int8 products are inexact on this CPU (it has no VNNI or AMX, and torch's int8 "
                "kernel saturates); use the compute type auto or float32"
            )
        if name == "bfloat16" and not cpu.bf16:
            log.warning("bfloat16 requested on a CPU without native bf16: expect it slower than float32")
        return ComputeChoice(name, "requested")
    candidates = ["float32"]
    if (cpu.vnni or cpu.amx) and int8_matmul_is_exact():
        candidates.append("int8")
    if cpu.bf16:
        candidates.append("bfloat16")
    if len(candidates) == 1:
        return ComputeChoice(
            "float32", "no VNNI, AMX or native bf16: int8 and bf16 are slower than float32 here"
        )
    times = measure_compute_types(*shape, candidates=candidates)
    timing = ", ".join(f"{kind} {ms:.2f} ms" for kind, ms in times.items())
    timing += f" for 1+8 rows of {shape[0]}x{shape[1]}"
    best = min(times, key=times.__getitem__)
    if best != "float32" and times[best] < _MARGIN * times["float32"]:
        return ComputeChoice(best, f"measured fastest: {timing}")
    return ComputeChoice("float32", f"nothing measured faster than float32: {timing}")


def measure_compute_types(
    inputs: int, outputs: int, *, candidates: Sequence[str] = ("float32", "int8"), repeats: int = 9
) -> dict[str, float]:
    """Median ms of a 1-row plus an 8-row pass through an inputs x outputs layer, per compute type.

    One row is a decoded token, eight a short prefill; together they stand for an
    update. The layers are the engine's own (Int8Linear for int8), so the
    measurement includes the per-token quantisation of the activations.
    """
    torch.manual_seed(0)
    out: dict[str, float] = {}
    with torch.inference_mode():
        linear = torch.nn.Linear(inputs, outputs, bias=False)
        rows = [torch.randn(n, inputs) for n in (1, 8)]
        for kind in candidates:
            if kind == "int8":
                layer: torch.nn.Module = Int8Linear(linear)
                batch = rows
            else:
                dtype = COMPUTE_TYPES[kind]
                layer = torch.nn.Linear(inputs, outputs, bias=False).to(dtype)
                batch = [x.to(dtype) for x in rows]
            out[kind] = _median_ms(_passes(layer, batch), repeats)
    return out


def _passes(layer: torch.nn.Module, batch: Sequence[torch.Tensor]) -> Callable[[], object]:
    return lambda: [layer(x) for x in batch]


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
        raise ModelUnavailable(f"cannot load the model in {model_dir}: {exc}") from exc
    model.eval()
    if name == "int8":
        quantize_linear_int8(model)
    return tokenizer, model
