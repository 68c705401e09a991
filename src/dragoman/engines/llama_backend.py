"""llama.cpp's CPU kernels, chosen by the CPU that runs the server.

The llama-cpp-python wheel (Makefile, scripts/build_llama_wheel.py) is built with
`GGML_BACKEND_DL` and `GGML_CPU_ALL_VARIANTS`: its CPU backend is one
`libggml-cpu-<variant>.so` per x86 level it keeps, each compiled for that level's
instructions, and the process uses the highest level the machine runs: on 2 cores of an
AVX-512 Xeon the AVX-512 kernels (`zen4`, ggml's name for AVX-512 with VBMI, VNNI and
BF16) prefill the 1.5B at 1.5x the speed of the `haswell` (AVX2) ones; decoding, bound
by memory, is the same (bench/history/). `make install` builds the variants of the
machine it runs on (`engines/llama_variants.py`); a wheel built elsewhere may lack this
CPU's best, and then the best it holds runs, with a warning in the log.

ggml looks for the variants beside the executable and in the working directory,
which for Python is neither, so `load_backend` picks one here and loads it
before llama.cpp initialises. The choice follows `dragoman.cpu`'s effective
flags, so the caps that emulate an AVX2-only machine (`ONEDNN_MAX_CPU_ISA=AVX2`
and the others) hold for llama.cpp too.

On a CPU with AMX that is `sapphirerapids`, whose matrix products hold the weights in AMX
tiles; the wheel's build patches how ggml configures the tiles, which faulted as released
(scripts/build_llama_wheel.py), and `engines/llama_amx.py` gives them the weights in the form
they decode fastest. `DRAGOMAN_LLAMA_CPU_VARIANT=<name>` loads a named variant (`zen4` for
AVX-512 without AMX, or `haswell` for the AVX2 path alone).
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from dragoman.cpu import cpu_info
from dragoman.engines import llama_log
from dragoman.engines.llama_variants import (
    FALLBACK,
    VARIANT_FLAGS,
    VARIANT_VARIABLE,
    choose_variant,
)
from dragoman.errors import ModelUnavailable
from dragoman.logs import get_logger

#: The variant table and choice live in llama_variants (no llama_cpp import); these are
#: re-exported for the callers that load kernels.
__all__ = [
    "VARIANT_FLAGS",
    "VARIANT_VARIABLE",
    "Backend",
    "choose_variant",
    "ggml_library",
    "library_dir",
    "load_backend",
    "variants_in",
]

log = get_logger(__name__)

_PREFIX, _SUFFIX = "libggml-cpu-", ".so"


@dataclass(frozen=True)
class Backend:
    """The CPU kernels llama.cpp runs on in this process."""

    #: The variant's name, or "built-in" for a wheel with one CPU backend linked in.
    variant: str
    #: Why: "best for this CPU", the variable that named it, or what a wheel built elsewhere lacks.
    reason: str

    def describe(self) -> str:
        return f"llama.cpp {self.variant} kernels ({self.reason})"


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
        llama_log.install()  # before the kernels load: they log too
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
        if backend.reason.startswith(FALLBACK):
            log.warning("llama.cpp CPU kernels", variant=backend.variant, reason=backend.reason)
        else:
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
