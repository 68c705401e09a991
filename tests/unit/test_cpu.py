"""The CPU report and the compute type chosen from it, with no model."""

from __future__ import annotations

import pytest

from dragoman.cpu import CPUInfo, effective_flags, parse_cpuinfo
from dragoman.engines.torch_lm.load import choose_compute_type, measure_compute_types
from dragoman.errors import ConfigError

SAPPHIRE = frozenset(
    [
        "fma",
        "avx",
        "avx2",
        "avx512f",
        "avx512bw",
        "avx512dq",
        "avx512vl",
        "avx512cd",
        "avx512_vnni",
        "avx_vnni",
        "avx512_bf16",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
        "sse4_1",
        "sse4_2",
        "aes",
    ]
)
EPYC = frozenset(["fma", "avx", "avx2", "sse4_1", "sse4_2", "aes", "sha_ni"])

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_1 avx avx2 fma

processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_1 avx avx2 fma
"""


def test_cpuinfo_gives_the_model_and_flags() -> None:
    model, flags = parse_cpuinfo(CPUINFO)
    assert model == "AMD EPYC 7B13"
    assert flags == frozenset({"fpu", "sse4_1", "avx", "avx2", "fma"})


def test_no_cap_keeps_every_flag() -> None:
    assert effective_flags(SAPPHIRE, {}) == (SAPPHIRE, None)


@pytest.mark.parametrize(
    "environ",
    [
        {"ONEDNN_MAX_CPU_ISA": "AVX2"},
        {"ATEN_CPU_CAPABILITY": "avx2"},
        {"CT2_FORCE_CPU_ISA": "AVX2"},
        # The lowest cap wins when several are set.
        {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX", "ATEN_CPU_CAPABILITY": "avx2"},
    ],
)
def test_an_avx2_cap_looks_like_an_epyc(environ: dict[str, str]) -> None:
    flags, cap = effective_flags(SAPPHIRE, environ)
    cpu = CPUInfo("emulated", 2, flags, cap)
    assert cpu.avx2 and not (cpu.avx512 or cpu.vnni or cpu.amx or cpu.bf16)
    assert "aes" in flags  # flags no level gates are kept
    assert cap is not None and "avx2" in cap.lower()


def test_a_vnni_cap_keeps_vnni_but_not_amx() -> None:
    flags, _ = effective_flags(SAPPHIRE, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"})
    cpu = CPUInfo("capped", 2, flags)
    assert cpu.avx512 and cpu.vnni and not cpu.amx and not cpu.bf16


def test_unknown_cap_values_are_ignored() -> None:
    assert effective_flags(SAPPHIRE, {"ONEDNN_MAX_CPU_ISA": "bogus"}) == (SAPPHIRE, None)


def test_describe_names_the_simd_that_matters() -> None:
    assert CPUInfo("Xeon", 2, SAPPHIRE).simd == ["AVX2", "AVX-512", "VNNI", "BF16", "AMX"]
    assert CPUInfo("EPYC", 2, EPYC).describe() == "EPYC, 2 cores, AVX2"


VNNI_ONLY = frozenset({"fma", "avx", "avx2", "avx512f", "avx512_vnni"})


def test_auto_takes_float32_without_vnni_amx_or_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    import dragoman.engines.torch_lm.load as load

    def measured(*args: object, **kwargs: object) -> dict[str, float]:
        raise AssertionError("nothing to measure: float32 is the only candidate")

    monkeypatch.setattr(load, "measure_compute_types", measured)
    choice = choose_compute_type("auto", cpu=CPUInfo("EPYC", 2, EPYC))
    assert choice.compute_type == "float32"
    assert "VNNI" in choice.reason


@pytest.mark.parametrize(
    ("flags", "times", "expected", "measured"),
    [
        # AMX: int8 and bf16 are both candidates; the fastest wins.
        (SAPPHIRE, {"float32": 2.0, "int8": 1.0, "bfloat16": 1.5}, "int8", {"float32", "int8", "bfloat16"}),
        (
            SAPPHIRE,
            {"float32": 2.0, "int8": 1.5, "bfloat16": 1.0},
            "bfloat16",
            {"float32", "int8", "bfloat16"},
        ),
        # Having the instructions is not enough: less than 10% faster keeps float32.
        (
            SAPPHIRE,
            {"float32": 2.0, "int8": 1.9, "bfloat16": 1.95},
            "float32",
            {"float32", "int8", "bfloat16"},
        ),
        # VNNI without native bf16: bf16 is not even measured.
        (VNNI_ONLY, {"float32": 2.0, "int8": 1.0}, "int8", {"float32", "int8"}),
    ],
)
def test_auto_measures_the_candidates_this_cpu_has(
    monkeypatch: pytest.MonkeyPatch,
    flags: frozenset[str],
    times: dict[str, float],
    expected: str,
    measured: set[str],
) -> None:
    import dragoman.engines.torch_lm.load as load

    asked: list[set[str]] = []

    def measure(*shape: int, candidates: list[str]) -> dict[str, float]:
        asked.append(set(candidates))
        return {kind: times[kind] for kind in candidates}

    monkeypatch.setattr(load, "measure_compute_types", measure)
    monkeypatch.setattr(load, "int8_matmul_is_exact", lambda: True)
    choice = choose_compute_type("auto", cpu=CPUInfo("Xeon", 2, flags))
    assert choice.compute_type == expected
    assert asked == [measured]


@pytest.mark.parametrize("requested", ["int8", "bfloat16", "float32"])
def test_a_requested_compute_type_is_kept(requested: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import dragoman.engines.torch_lm.load as load

    monkeypatch.setattr(load, "int8_matmul_is_exact", lambda: True)
    choice = choose_compute_type(requested, cpu=CPUInfo("EPYC", 2, EPYC))
    assert (choice.compute_type, choice.reason) == (requested, "requested")


def test_int8_is_refused_where_its_products_are_inexact(monkeypatch: pytest.MonkeyPatch) -> None:
    import dragoman.engines.torch_lm.load as load

    monkeypatch.setattr(load, "int8_matmul_is_exact", lambda: False)
    with pytest.raises(ConfigError, match="inexact"):
        choose_compute_type("int8", cpu=CPUInfo("Xeon", 2, SAPPHIRE))
    asked: list[list[str]] = []

    def measure(*shape: int, candidates: list[str]) -> dict[str, float]:
        asked.append(list(candidates))
        return dict.fromkeys(candidates, 1.0)

    monkeypatch.setattr(load, "measure_compute_types", measure)
    choose_compute_type("auto", cpu=CPUInfo("Xeon", 2, SAPPHIRE))
    assert asked == [["float32", "bfloat16"]]  # VNNI and AMX, but int8 is not a candidate


def test_the_int8_check_compares_with_exact_integer_products() -> None:
    from dragoman.cpu import cpu_info
    from dragoman.engines.torch_lm.int8 import int8_matmul_is_exact

    # Where the CPU has int8 dot products, the kernel must be exact (int8 is only used there).
    cpu = cpu_info()
    assert int8_matmul_is_exact() or not (cpu.vnni or cpu.amx)


def test_the_measurement_times_each_candidate() -> None:
    times = measure_compute_types(64, 128, candidates=["float32", "int8", "bfloat16"], repeats=2)
    assert set(times) == {"float32", "int8", "bfloat16"} and all(ms > 0 for ms in times.values())
