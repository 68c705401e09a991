"""The CPU the server runs on: its model, cores and the SIMD extensions its kernels may use.

Machines that all say "2 cores" differ: some are Intel with AVX-512, VNNI and AMX,
others AMD EPYC with AVX2 and FMA only. An int8 product through `torch._int_mm`
took 0.7 ms on the first and 30 ms on the second, 8x slower than fp32 there, so
engines choose their compute path from what this module reports, and every
benchmark records it.

The libraries can be told to use less than the CPU has, which is how an AVX2-only
machine is emulated on a bigger one: `ATEN_CPU_CAPABILITY=avx2` (PyTorch's own
kernels), `ONEDNN_MAX_CPU_ISA=AVX2` (oneDNN, which runs `_int_mm` and bf16
products) and `CT2_FORCE_CPU_ISA=AVX2` (CTranslate2). The flags reported here are
the effective ones: the lowest of those caps in force removes what lies above it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Instruction-set levels in rising order, each with the /proc/cpuinfo flags it adds.
_LEVELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("sse41", frozenset({"sse4_1", "sse4_2"})),
    ("avx", frozenset({"avx"})),
    ("avx2", frozenset({"avx2", "fma"})),
    ("avx2_vnni", frozenset({"avx_vnni"})),
    ("avx512", frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"})),
    ("avx512_vnni", frozenset({"avx512_vnni"})),
    ("avx512_bf16", frozenset({"avx512_bf16", "avx512_fp16"})),
    ("amx", frozenset({"amx_tile", "amx_int8", "amx_bf16", "amx_fp16"})),
)
_RANK = {name: rank for rank, (name, _) in enumerate(_LEVELS)}
_GATED = frozenset().union(*(flags for _, flags in _LEVELS))

#: Each library's cap variable and how its values name the levels above.
_CAP_VARIABLES: dict[str, dict[str, str]] = {
    "ATEN_CPU_CAPABILITY": {"default": "", "avx2": "avx2", "avx512": "avx512_bf16"},
    "ONEDNN_MAX_CPU_ISA": {
        "default": "",
        "all": "",
        "sse41": "sse41",
        "avx": "avx",
        "avx2": "avx2",
        "avx2_vnni": "avx2_vnni",
        "avx2_vnni_2": "avx2_vnni",
        "avx512_core": "avx512",
        "avx512_core_vnni": "avx512_vnni",
        "avx512_core_bf16": "avx512_bf16",
        "avx512_core_fp16": "avx512_bf16",
        "avx10_1_512": "avx512_bf16",
        "avx512_core_amx": "amx",
        "avx512_core_amx_fp16": "amx",
        "avx10_1_512_amx": "amx",
        "avx10_1_512_amx_fp16": "amx",
    },
    "CT2_FORCE_CPU_ISA": {"generic": "sse41", "avx": "avx", "avx2": "avx2", "avx512": "avx512_bf16"},
}


@dataclass(frozen=True)
class CPUInfo:
    model: str
    cores: int
    #: Effective SIMD flags: those of /proc/cpuinfo less what a cap variable removes.
    flags: frozenset[str]
    #: "ONEDNN_MAX_CPU_ISA=AVX2" when a cap variable is in force, else None.
    cap: str | None = None

    @property
    def avx2(self) -> bool:
        return "avx2" in self.flags

    @property
    def avx512(self) -> bool:
        return "avx512f" in self.flags

    @property
    def vnni(self) -> bool:
        """int8 dot products in one instruction (AVX-VNNI or AVX-512 VNNI)."""
        return bool({"avx_vnni", "avx512_vnni"} & self.flags)

    @property
    def amx(self) -> bool:
        return "amx_int8" in self.flags

    @property
    def bf16(self) -> bool:
        """Native bf16 products (AVX-512 BF16 or AMX-BF16); elsewhere bf16 is emulated and slow."""
        return bool({"avx512_bf16", "amx_bf16"} & self.flags)

    @property
    def simd(self) -> list[str]:
        """The extensions that decide kernel speed, as benchmarks print them."""
        named = [
            ("AVX2", self.avx2),
            ("AVX-512", self.avx512),
            ("VNNI", self.vnni),
            ("BF16", self.bf16),
            ("AMX", self.amx),
        ]
        return [name for name, present in named if present]

    def describe(self) -> str:
        """One line for logs and benchmark tables: model, cores, SIMD, and any emulation cap."""
        simd = " ".join(self.simd) or "no AVX2"
        cap = f" (capped: {self.cap})" if self.cap else ""
        return f"{self.model}, {self.cores} cores, {simd}{cap}"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "cores": self.cores, "simd": self.simd, "cap": self.cap}


def effective_flags(flags: frozenset[str], environ: Mapping[str, str]) -> tuple[frozenset[str], str | None]:
    """`flags` less the levels above the lowest cap variable set in `environ`, and that cap."""
    lowest: tuple[int, str] | None = None
    for variable, names in _CAP_VARIABLES.items():
        value = environ.get(variable, "").strip()
        level = names.get(value.lower()) if value else None
        if level:
            rank = _RANK[level]
            if lowest is None or rank < lowest[0]:
                lowest = (rank, f"{variable}={value}")
    if lowest is None:
        return flags, None
    allowed = frozenset().union(*(f for name, f in _LEVELS if _RANK[name] <= lowest[0]))
    return frozenset(f for f in flags if f not in _GATED or f in allowed), lowest[1]


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor in a /proc/cpuinfo text."""
    model, flags = "unknown CPU", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    return model, flags


def available_cores() -> int:
    """Cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@functools.cache
def cpu_info() -> CPUInfo:
    """This machine's CPU, read once."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    model, flags = parse_cpuinfo(text)
    flags, cap = effective_flags(flags, os.environ)
    return CPUInfo(model=model, cores=available_cores(), flags=flags, cap=cap)
