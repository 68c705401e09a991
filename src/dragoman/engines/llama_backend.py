"""llama.cpp's CPU kernels, chosen by the CPU that runs the server.

The llama-cpp-python wheel (Makefile, scripts/build_llama_wheel.py) is built with
`GGML_BACKEND_DL` and `GGML_CPU_ALL_VARIANTS`: its CPU backend is one
`libggml-cpu-<variant>.so` per x86 level it keeps (`x64`, `haswell`, `skylakex`,
`icelake`, `zen4`; ggml's table below has all fourteen), each compiled for that
level's instructions. One wheel then runs on every x86 machine and uses the
highest level the machine runs: on 2 cores of an AVX-512 Xeon the AVX-512 kernels
(`zen4`, ggml's name for AVX-512 with VBMI, VNNI and BF16) prefill the 1.5B at 1.5x
the speed of the `haswell` (AVX2) ones; decoding, bound by memory, is the same
(bench/history/).

ggml looks for the variants beside the executable and in the working directory,
which for Python is neither, so `load_backend` picks one here and loads it
before llama.cpp initialises. The choice follows `dragoman.cpu`'s effective
flags, so the caps that emulate an AVX2-only machine (`ONEDNN_MAX_CPU_ISA=AVX2`
and the others) hold for llama.cpp too.

The AMX variant (which `make install` no longer builds) is left out unless asked
for by name: on the machines this project runs on, ggml's AMX matrix product dies
with SIGILL at a `tilezero` (even on one thread), although a plain program loads a tile config and runs
tile instructions there without a fault. `DRAGOMAN_LLAMA_CPU_VARIANT=<name>`
loads a named variant (`sapphirerapids`, or `haswell` for the AVX2 path alone).
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from dragoman.cpu import cpu_info
from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Names a variant to load instead of the best one this CPU allows.
VARIANT_VARIABLE = "DRAGOMAN_LLAMA_CPU_VARIANT"

_HASWELL = frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"})
_AVX512 = _HASWELL | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}

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
    "sapphirerapids": _AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"},
}
#: Variants loaded only by name (see the module's docstring).
BY_NAME_ONLY = frozenset({"sapphirerapids"})

_PREFIX, _SUFFIX = "libggml-cpu-", ".so"


@dataclass(frozen=True)
class Backend:
    """The CPU kernels llama.cpp runs on in this process."""

    #: The variant's name, or "built-in" for a wheel with one CPU backend linked in.
    variant: str
    #: Why: "best for this CPU", or the variable that named it.
    reason: str

    def describe(self) -> str:
        return f"llama.cpp {self.variant} kernels ({self.reason})"


def choose_variant(
    available: Sequence[str], flags: frozenset[str], environ: Mapping[str, str]
) -> tuple[str, str]:
    """(variant, reason): the named one, else the one using the most of `flags`.

    `available` are the variants the wheel holds; `flags` the CPU's effective flags.
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
    usable = [
        v for v in available if v in VARIANT_FLAGS and v not in BY_NAME_ONLY and VARIANT_FLAGS[v] <= flags
    ]
    if not usable:
        raise ModelUnavailable(f"no llama.cpp CPU variant of {', '.join(sorted(available))} runs here")
    # The most instructions wins; ties (icelake and cooperlake) go to the later in the table.
    order = list(VARIANT_FLAGS)
    best = max(usable, key=lambda v: (len(VARIANT_FLAGS[v]), order.index(v)))
    return best, "best for this CPU"


def library_dir() -> Path:
    """Where llama-cpp-python loaded libllama from (it honours `LLAMA_CPP_LIB_PATH`)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    return Path(override) if override else Path(llama_cpp.__file__).parent / "lib"


def variants_in(directory: Path) -> list[str]:
    return sorted(p.name[len(_PREFIX) : -len(_SUFFIX)] for p in directory.glob(f"{_PREFIX}*{_SUFFIX}"))


_lock = threading.Lock()
_loaded: Backend | None = None


def load_backend() -> Backend:
    """Load the CPU kernels once per process and initialise llama.cpp; the kernels chosen."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        directory = library_dir()
        available = variants_in(directory)
        if available:
            variant, reason = choose_variant(available, cpu_info().flags, os.environ)
            _register(directory / f"{_PREFIX}{variant}{_SUFFIX}")
            backend = Backend(variant=variant, reason=reason)
        else:
            # A wheel built without GGML_BACKEND_DL has its CPU backend linked in.
            backend = Backend(variant="built-in", reason="this llama.cpp build has no variants")
        llama_cpp.llama_backend_init()
        log.info("llama.cpp CPU kernels", variant=backend.variant, reason=backend.reason)
        _loaded = backend
        return backend


@functools.cache
def ggml_library() -> ctypes.CDLL:
    """ggml's C API as llama.cpp links it.

    Through libllama's own handle: dlsym searches its dependencies, so these are the
    libggml and libggml-base llama.cpp uses. The wheel holds copies (libggml.so,
    .so.0, ...), not links, and opening one of them by path can load a second,
    separate ggml with a registry of its own.
    """
    return ctypes.CDLL(str(library_dir() / "libllama.so"))


def _register(path: Path) -> None:
    lib = ggml_library()
    lib.ggml_backend_load.restype = ctypes.c_void_p
    lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
    if not lib.ggml_backend_load(str(path).encode()):
        raise ModelUnavailable(f"llama.cpp could not load its CPU kernels from {path.name}")
