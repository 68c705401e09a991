"""GGUF weights in a form llama.cpp's AMX kernels run fast.

On a CPU with AMX the server loads ggml's `sapphirerapids` kernels (`llama_backend`). Their
matrix products take Q4_0, Q4_1 and Q8_0 weights into AMX tiles for a prompt and decode one
token with AVX-512 VNNI; the 4-bit K-quants the packaged models ship as (Q4_K_M) gain less.
Measured on 2 cores of an Intel Xeon with AMX, the 1.5B (bench/history/2026-12-05_amx.md):

| weights, kernels | prefill | decode | next-token KL from the Q4_K_M |
|---|---:|---:|---:|
| Q4_K_M, `zen4` (AVX-512) | 90 tok/s | 70 ms/tok | |
| Q4_K_M, `sapphirerapids` (AMX) | 124 tok/s | 73 ms/tok | |
| Q8_0 from the Q4_K_M, `sapphirerapids` | 169 tok/s | 64-69 ms/tok | 0.002-0.004 |
| Q4_1 from the Q4_K_M, `sapphirerapids` | 164 tok/s | 49 ms/tok | 0.017-0.029 |

(KL over 20 FLORES lines into German, Italian and Chinese, teacher-forced.) Q8_0 holds every
Q4_K_M weight to within its 8-bit grid: the same model, and the reference translations'
likelihood is unchanged. Q4_1 decodes faster but is another 4-bit rounding (the Q6_K tensors
lose two bits): 93-95 % of its next tokens agree with the Q4_K_M's and the references' NLL
rises ~1 %.

So on the AMX kernels a Q4_K GGUF is converted once, by llama.cpp's own quantiser, into the
cache (`<cache>/llama-amx/`), and the copy is what loads: Q8_0 by default,
`DRAGOMAN_LLAMA_AMX_WEIGHTS=q4_1` for the faster decode, `keep` for the GGUF as it is. A copy's
name holds the source's path, size and modification time and llama.cpp's version, so a changed
source converts again, and it is written whole or not at all (a temporary file renamed). Any
other GGUF loads as it is, and so does every GGUF where Linux does not let the process use AMX
tiles (the kernels then run AVX-512, where the Q4_K_M is the faster form).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
import time
from pathlib import Path

import gguf
import llama_cpp

from dragoman.engines.llama_backend import load_backend
from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: The form of the copies: `q8_0` (the default), `q4_1`, or `keep` (no copy).
WEIGHTS_VARIABLE = "DRAGOMAN_LLAMA_AMX_WEIGHTS"
KEEP = "keep"
#: llama.cpp's LLAMA_FTYPE of each form.
FORMS = {"q8_0": 7, "q4_1": 3}
DEFAULT_FORM = "q8_0"
#: The kernels that hold weights in AMX tiles (`engines/llama_variants.py`).
AMX_VARIANTS = frozenset({"sapphirerapids"})
#: `general.file_type` of the files converted: llama.cpp's MOSTLY_Q4_K_S and MOSTLY_Q4_K_M.
_Q4_K_FILES = frozenset({14, 15})
FOLDER = "llama-amx"
#: x86-64 Linux's arch_prctl, its request for an extended state component, and AMX tile data.
_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA = 158, 0x1023, 18
#: A copy's name after its source's stem.
_COPY = re.compile(r"[0-9a-f]{16}-(?:" + "|".join(FORMS) + r")\.gguf")

_lock = threading.Lock()


def weights_for_kernels(path: Path, cache_dir: Path) -> Path:
    """The GGUF to load for `path` on the kernels this process runs: `path`, or its copy."""
    form = _form()
    if form == KEEP or load_backend().variant not in AMX_VARIANTS or not tiles_permitted():
        return path
    if _file_type(path) not in _Q4_K_FILES:
        return path
    folder = Path(cache_dir).expanduser() / FOLDER
    target = folder / f"{path.stem}-{_source_key(path)}-{form}.gguf"
    with _lock:  # engines load on several threads; one converts, the others find its copy
        if not target.exists():
            for stale in folder.glob(f"{path.stem}-*.gguf"):
                if _COPY.fullmatch(stale.name.removeprefix(f"{path.stem}-")):
                    stale.unlink(missing_ok=True)  # an earlier source's copy, or another form's
            _convert(path, target, form)
    return target


def tiles_permitted() -> bool:
    """Whether Linux lets this process use AMX tile data, as ggml asks before it puts weights in
    tiles; where it does not (a kernel or sandbox without it), the AMX kernels fall back to
    AVX-512, on which the Q4_K_M runs faster than a copy."""
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA)) == 0


def _form() -> str:
    form = os.environ.get(WEIGHTS_VARIABLE, "").strip().lower() or DEFAULT_FORM
    if form != KEEP and form not in FORMS:
        raise ConfigError(f"{WEIGHTS_VARIABLE}={form}: use {', '.join([*FORMS, KEEP])}")
    return form


def _file_type(path: Path) -> int | None:
    field = gguf.GGUFReader(path).get_field("general.file_type")
    return None if field is None else int(field.contents())


def _source_key(path: Path) -> str:
    stat = path.stat()
    source = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{llama_cpp.__version__}"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _convert(source: Path, target: Path, form: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FORMS[form]
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    log.info("converting a GGUF for the AMX kernels (once)", source=source.name, into=form)
    started = time.monotonic()
    try:
        failed = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), params)
        if failed:
            raise ModelUnavailable(f"llama.cpp could not convert {source.name} for its AMX kernels")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    log.info(
        "converted a GGUF for the AMX kernels",
        source=source.name,
        into=form,
        seconds=round(time.monotonic() - started, 1),
        mib=round(target.stat().st_size / 2**20),
    )
