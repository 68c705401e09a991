"""The CPU report and the compute type chosen from it, with no model."""

from __future__ import annotations

import pytest

from dragoman.cpu import CPUInfo, effective_flags, parse_cpuinfo
from dragoman.engines.torch_lm.load import choose_compute_type, measure_int8_against_fp32

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
    assert CPUInfo("Xeon", 2, SAPPHIRE).simd == ["AVX2", "AVX-512", "VNNI", "AMX"]
    assert CPUInfo("EPYC", 2, EPYC).describe() == "EPYC, 2 cores, AVX2"


def test_auto_takes_float32_without_vnni_or_amx() -> None:
    choice = choose_compute_type("auto", cpu=CPUInfo("EPYC", 2, EPYC))
    assert choice.compute_type == "float32"
    assert "VNNI" in choice.reason


def test_auto_measures_where_int8_may_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    import dragoman.engines.torch_lm.load as load

    xeon = CPUInfo("Xeon", 2, SAPPHIRE)
    monkeypatch.setattr(load, "measure_int8_against_fp32", lambda *shape: (1.0, 2.0))
    assert choose_compute_type("auto", cpu=xeon).compute_type == "int8"
    # VNNI alone is not enough: a measurement that shows no gain keeps float32.
    monkeypatch.setattr(load, "measure_int8_against_fp32", lambda *shape: (1.9, 2.0))
    assert choose_compute_type("auto", cpu=xeon).compute_type == "float32"


@pytest.mark.parametrize("requested", ["int8", "bfloat16", "float32"])
def test_a_requested_compute_type_is_kept(requested: str) -> None:
    choice = choose_compute_type(requested, cpu=CPUInfo("EPYC", 2, EPYC))
    assert (choice.compute_type, choice.reason) == (requested, "requested")


def test_the_measurement_times_both_paths() -> None:
    int8_ms, fp32_ms = measure_int8_against_fp32(64, 128, repeats=2)
    assert int8_ms > 0 and fp32_ms > 0
