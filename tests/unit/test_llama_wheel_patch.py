"""The llama.cpp build keeps only the CPU variants the Makefile names (scripts/build_llama_wheel.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_llama_wheel.py"

#: The shape of ggml/src/CMakeLists.txt in llama-cpp-python 0.3.36: the function's own x86 branch
#: first (which must be left alone), then the variant list.
GGML = """\
function(ggml_add_cpu_backend_variant tag_name)
    if (GGML_SYSTEM_ARCH STREQUAL "x86")
        set(GGML_AVX OFF)
    elseif (GGML_SYSTEM_ARCH STREQUAL "ARM")
    endif()
endfunction()

if (GGML_CPU_ALL_VARIANTS)
    if (GGML_SYSTEM_ARCH STREQUAL "x86")
        ggml_add_cpu_backend_variant(x64)
        ggml_add_cpu_backend_variant(sse42              SSE42)
        if (NOT MSVC)
            ggml_add_cpu_backend_variant(ivybridge      SSE42 AVX F16C)
        endif()
        ggml_add_cpu_backend_variant(haswell            SSE42 AVX F16C FMA AVX2 BMI2)
        ggml_add_cpu_backend_variant(zen4               SSE42 AVX F16C FMA AVX2 BMI2 AVX512)
        ggml_add_cpu_backend_variant(sapphirerapids SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AMX_TILE)
    elseif(GGML_SYSTEM_ARCH STREQUAL "ARM")
        ggml_add_cpu_backend_variant(armv8.0_1)
    endif()
endif()
"""


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_llama_wheel", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_named_x86_variants_are_kept() -> None:
    patched = script().keep_variants(GGML, {"x64", "haswell", "zen4"})
    kept = [line.split("(")[1].split()[0].rstrip(")") for line in patched.splitlines() if "_variant(" in line]
    assert kept == ["x64", "haswell", "zen4", "armv8.0_1"]
    assert "set(GGML_AVX OFF)" in patched  # the function's own branch is untouched


def test_a_variant_ggml_does_not_have_stops_the_build() -> None:
    with pytest.raises(SystemExit, match="no x86 CPU variant icelake"):
        script().keep_variants(GGML, {"x64", "icelake"})


def test_progress_shows_percent_an_estimate_and_what_compiles_without_flooding() -> None:
    progress = script().Progress(every=0.0)
    assert progress.line("-- Adding CPU backend variant ggml-cpu-haswell: -mavx2") is None
    first = progress.line("  [1/80] /usr/bin/cc -o vendor/llama.cpp/src/CMakeFiles/llama.dir/llama.cpp.o")
    assert first is not None and "1% (1/80 steps)" in first and "estimating" in first
    assert "compiling libllama and ggml" in first
    kernel = "  [40/80] /usr/bin/g++ -o ggml/src/CMakeFiles/ggml-cpu-haswell.dir/ggml-cpu/ops.cpp.o"
    shown = progress.line(kernel)
    assert shown is not None and "50% (40/80 steps)" in shown and "left" in shown
    assert "compiling the haswell kernels" in shown
    # Within its interval a line waits, except the last step's.
    quiet = script().Progress(every=3600.0)
    assert quiet.line("[1/80] cc") is not None
    assert quiet.line("[2/80] cc") is None
    assert quiet.line("[80/80] ld") is not None


MMQ = """inline void ggml_tile_config_init(void) {
    static thread_local bool done = false;

    if (done) {
        return;
    }

    alignas(64) tile_config_t tc = {};
    tc.palette_id = 1;
    _tile_loadconfig(&tc);
    done = true;
}
"""


def test_the_amx_tile_configuration_is_static_and_loaded_at_every_product() -> None:
    patched = script().tile_config_each_time(MMQ)
    assert patched == (
        "inline void ggml_tile_config_init(void) {\n"
        "\n"
        "    alignas(64) static thread_local tile_config_t tc = {};\n"
        "    tc.palette_id = 1;\n"
        "    _tile_loadconfig(&tc);\n"
        "}\n"
    )


def test_a_changed_amx_source_stops_the_build() -> None:
    with pytest.raises(SystemExit, match="AMX tile configuration was not found"):
        script().tile_config_each_time(MMQ.replace("alignas(64) ", ""))
    with pytest.raises(SystemExit, match="AMX tile configuration was not found"):
        script().tile_config_each_time(MMQ.replace("done = true;", "done = 1;"))
