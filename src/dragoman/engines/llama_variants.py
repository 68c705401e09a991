"""llama.cpp's x86 CPU kernel variants: which a CPU runs, and which `make install` builds.

ggml can build its CPU backend once per x86 level (`GGML_CPU_ALL_VARIANTS`), each a
`libggml-cpu-<variant>.so` compiled for that level's instructions, and the server loads
the best the CPU runs (`engines/llama_backend.py`). Each variant is a full compile of
the kernels (about 45 CPU-seconds, against about 175 for libllama and ggml's base), so `make install` builds only what
the machine it runs on needs (`build_set`): the best variant for this CPU, and `haswell`
(AVX2) below it, which the AVX2 caps of `dragoman.cpu` select and which runs on every
x86 server of the last decade. `PORTABLE` is the set for a virtualenv or image that
moves between machines.

This module imports nothing from llama-cpp-python, so the Makefile can ask it which
variants to build before the package exists:

    python -m dragoman.engines.llama_variants            # this CPU's set, e.g. haswell
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from dragoman.cpu import parse_cpuinfo
from dragoman.errors import ConfigError, ModelUnavailable

#: Names a variant to load instead of the best one this CPU allows.
VARIANT_VARIABLE = "DRAGOMAN_LLAMA_CPU_VARIANT"

_HASWELL = frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"})
_AVX512 = _HASWELL | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
#: What a variant needs to hold weights in AMX tiles.
AMX_FLAGS = frozenset({"amx_tile", "amx_int8"})

#: Each x86 variant ggml builds and the /proc/cpuinfo flags its kernels use, as in
#: ggml/src/CMakeLists.txt (`ggml_add_cpu_backend_variant`).
VARIANT_FLAGS: dict[str, frozenset[str]] = {
    "x64": frozenset(),
    "sse42": frozenset({"sse4_2"}),
    "sandybridge": frozenset({"sse4_2", "avx"}),
    "ivybridge": frozenset({"sse4_2", "avx", "f16c"}),
    "piledriver": frozenset({"sse4_2", "avx", "f16c", "fma"}),
    "haswell": _HASWELL,
    "alderlake": _HASWELL | {"avx_vnni"},
    "skylakex": _AVX512,
    "cannonlake": _AVX512 | {"avx512vbmi"},
    "cascadelake": _AVX512 | {"avx512_vnni"},
    "icelake": _AVX512 | {"avx512vbmi", "avx512_vnni"},
    "cooperlake": _AVX512 | {"avx512_vnni", "avx512_bf16"},
    "zen4": _AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16"},
    "sapphirerapids": _AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16"} | AMX_FLAGS,
}

#: For a virtualenv or image that moves between machines: any x86-64, AVX2 (every AMD EPYC and
#: Intel Xeon since 2013), AVX-512 (Skylake-SP and Cascade Lake Xeons), with VBMI and VNNI (Ice
#: Lake), with BF16 too (AMD Zen 4 and 5), and with AMX (Sapphire Rapids and later). On a Sapphire
#: Rapids Xeon `skylakex` and `icelake` prefill the 1.5B at 0.94x and 0.97x `zen4`'s speed (bench/history).
PORTABLE = ("x64", "haswell", "skylakex", "icelake", "zen4", "sapphirerapids")

BEST = "best for this CPU"
#: How the reason of a wheel that lacks this CPU's best variant begins.
FALLBACK = "the best this build holds"


def runs_on(variant: str, flags: frozenset[str]) -> bool:
    return variant in VARIANT_FLAGS and VARIANT_FLAGS[variant] <= flags


def best_of(variants: Iterable[str], flags: frozenset[str]) -> str | None:
    """The variant using the most of `flags`; None if none runs."""
    usable = [v for v in variants if runs_on(v, flags)]
    if not usable:
        return None
    # The most instructions wins; ties (icelake and cooperlake) go to the later in the table.
    order = list(VARIANT_FLAGS)
    return max(usable, key=lambda v: (len(VARIANT_FLAGS[v]), order.index(v)))


def build_set(flags: frozenset[str]) -> list[str]:
    """The variants `make install` builds for a CPU with `flags`: its best, and `haswell` below it.

    Where the best holds weights in AMX tiles, the best without AMX too: what the CPU runs
    with AMX capped off, and by name (`zen4`) should its AMX kernels fail on some machine.
    """
    best = best_of(VARIANT_FLAGS, flags) or "x64"
    wanted = {best}
    if AMX_FLAGS & VARIANT_FLAGS[best]:
        wanted.add(best_of(VARIANT_FLAGS, flags - AMX_FLAGS) or "x64")
    if runs_on("haswell", flags):
        wanted.add("haswell")
    return [v for v in VARIANT_FLAGS if v in wanted]


def choose_variant(
    available: Sequence[str], flags: frozenset[str], environ: Mapping[str, str]
) -> tuple[str, str]:
    """(variant, reason): the named one, else the one using the most of `flags`.

    `available` are the variants the wheel holds; `flags` the CPU's effective flags. A wheel
    built on another machine may lack this CPU's best: then the best it holds runs, and the
    reason says what a build here would add; if none runs, the error says how to get one.
    """
    named = environ.get(VARIANT_VARIABLE, "").strip()
    if named:
        if named not in available:
            raise ConfigError(
                f"{VARIANT_VARIABLE}={named}: this llama.cpp build has {', '.join(sorted(available))}"
            )
        missing = VARIANT_FLAGS.get(named, frozenset()) - flags
        if missing:
            raise ConfigError(
                f"{VARIANT_VARIABLE}={named} needs {' '.join(sorted(missing))}, which this CPU lacks"
            )
        return named, f"{VARIANT_VARIABLE}={named}"
    best = best_of(available, flags)
    ideal = best_of(VARIANT_FLAGS, flags)
    if best is None:
        raise ModelUnavailable(
            f"this llama.cpp build has CPU kernels for {', '.join(sorted(available))}, none of which runs"
            f" on this CPU (it needs {ideal}): the wheel was built for another machine; `make install`"
            " here builds one for this CPU"
        )
    if best != ideal:
        return best, (
            f"{FALLBACK}: this CPU runs {ideal}, which the wheel lacks (it was built"
            " for another machine; `make install` here builds it)"
        )
    return best, BEST


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Print the llama.cpp CPU variants to build, comma-separated."
    )
    parser.add_argument(
        "--cpuinfo", type=Path, default=Path("/proc/cpuinfo"), help="read the flags from here"
    )
    args = parser.parse_args()
    try:
        text = args.cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""  # not Linux: only the plain x86-64 kernels are known to run
    # The CPU's own flags, not the effective ones: the AVX2 caps choose among what is built.
    print(",".join(build_set(parse_cpuinfo(text)[1])))


if __name__ == "__main__":
    main()
