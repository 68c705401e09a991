"""Which llama.cpp CPU variants a CPU gets built (`build_set`) and loads (`choose_variant`)."""

from __future__ import annotations

import pytest

from dragoman.cpu import effective_flags, parse_cpuinfo
from dragoman.engines.llama_variants import (
    BEST,
    FALLBACK,
    VARIANT_FLAGS,
    VARIANT_VARIABLE,
    build_set,
    choose_variant,
)
from dragoman.errors import ConfigError, ModelUnavailable

#: What the wheel holds (GGML_CPU_ALL_VARIANTS on x86).
ALL = sorted(VARIANT_FLAGS)

BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx f16c fma avx2 bmi1 bmi2"
#: The flags of a Sapphire Rapids Xeon (this project's Intel machines) and of an AMD EPYC
#: Rome/Milan (AVX2, no AVX-512), as /proc/cpuinfo lists them.
XEON = (
    f"{BASE} avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi avx512_vbmi2"
    " avx512_vnni avx512_bitalg avx512_vpopcntdq avx_vnni avx512_bf16 avx512_fp16"
    " amx_bf16 amx_tile amx_int8"
)
EPYC = f"{BASE} sha_ni clzero"


def flags_of(listed: str) -> frozenset[str]:
    return parse_cpuinfo(f"model name\t: test\nflags\t\t: {listed}\n")[1]


def test_an_avx2_only_epyc_gets_the_haswell_kernels() -> None:
    assert choose_variant(ALL, flags_of(EPYC), {}) == ("haswell", "best for this CPU")


def test_a_xeon_with_amx_gets_the_amx_kernels_and_without_amx_the_avx512_ones() -> None:
    assert choose_variant(ALL, flags_of(XEON), {}) == ("sapphirerapids", BEST)
    capped, _ = effective_flags(flags_of(XEON), {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"})
    assert choose_variant(ALL, capped, {})[0] == "zen4"
    named = {VARIANT_VARIABLE: "zen4"}
    assert choose_variant(ALL, flags_of(XEON), named) == ("zen4", f"{VARIANT_VARIABLE}=zen4")


@pytest.mark.parametrize(
    "cap", ["ONEDNN_MAX_CPU_ISA=AVX2", "CT2_FORCE_CPU_ISA=AVX2", "ATEN_CPU_CAPABILITY=avx2"]
)
def test_the_avx2_emulation_caps_hold_for_llama_cpp(cap: str) -> None:
    variable, value = cap.split("=")
    flags, _ = effective_flags(flags_of(XEON), {variable: value})
    assert choose_variant(ALL, flags, {})[0] == "haswell"


def test_avx_vnni_without_avx512_is_alderlake() -> None:
    assert choose_variant(ALL, flags_of(f"{BASE} avx_vnni"), {})[0] == "alderlake"


def test_only_what_the_wheel_holds_is_chosen() -> None:
    assert choose_variant(["x64", "sse42", "haswell"], flags_of(XEON), {})[0] == "haswell"


def test_a_named_variant_must_exist_and_fit_the_cpu() -> None:
    with pytest.raises(ConfigError, match="build has"):
        choose_variant(["haswell"], flags_of(XEON), {VARIANT_VARIABLE: "icelake"})
    with pytest.raises(ConfigError, match="avx512f"):
        choose_variant(ALL, flags_of(EPYC), {VARIANT_VARIABLE: "skylakex"})
    assert choose_variant(ALL, flags_of(XEON), {VARIANT_VARIABLE: " haswell "})[0] == "haswell"


def test_no_variant_that_runs_here_is_an_error_that_says_how_to_get_one() -> None:
    with pytest.raises(ModelUnavailable, match="make install"):
        choose_variant(["haswell", "icelake"], flags_of("fpu sse sse2"), {})
    # An AVX2-only EPYC given a wheel built on an AVX-512 Xeon that kept only its own best.
    with pytest.raises(ModelUnavailable, match="it needs haswell"):
        choose_variant(["zen4"], flags_of(EPYC), {})


def test_a_wheel_built_elsewhere_falls_back_to_the_best_it_holds_and_says_so() -> None:
    # The Xeon given the EPYC's wheel runs its AVX2 kernels, and the reason names what it lacks.
    variant, reason = choose_variant(build_set(flags_of(EPYC)), flags_of(XEON), {})
    assert variant == "haswell"
    assert reason.startswith(FALLBACK) and "sapphirerapids" in reason
    assert choose_variant(build_set(flags_of(XEON)), flags_of(XEON), {}) == ("sapphirerapids", BEST)


@pytest.mark.parametrize(
    ("listed", "built"),
    [
        (EPYC, ["haswell"]),
        # With AMX, the best without it too.
        (XEON, ["haswell", "zen4", "sapphirerapids"]),
        # Skylake-SP: AVX-512 without VBMI or VNNI.
        (f"{BASE} avx512f avx512dq avx512cd avx512bw avx512vl", ["haswell", "skylakex"]),
        ("fpu sse sse2 sse4_1 sse4_2 popcnt", ["sse42"]),
        ("", ["x64"]),
    ],
)
def test_make_install_builds_the_best_variant_and_haswell_below_it(listed: str, built: list[str]) -> None:
    flags = flags_of(listed)
    assert build_set(flags) == built
    # Whatever it builds, the machine that built it loads its best, and the AVX2 caps find haswell.
    assert choose_variant(built, flags, {}) == (built[-1], BEST)
    if "avx2" in flags:
        capped, _ = effective_flags(flags, {"ONEDNN_MAX_CPU_ISA": "AVX2"})
        assert choose_variant(built, capped, {})[0] == "haswell"
