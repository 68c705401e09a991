"""Build the portable llama-cpp-python wheel that `make install` caches, with progress.

llama-cpp-python has no binary wheel on PyPI, and its default build is tuned to the building
CPU (it crashed on other machines in ggml's AMX kernels). This builds it with
`GGML_BACKEND_DL` and `GGML_CPU_ALL_VARIANTS`: llama.cpp's CPU kernels as separate libraries,
one per x86 level, of which the server loads the best the CPU runs
(`src/dragoman/engines/llama_backend.py`).

ggml builds all fourteen x86 levels and has no option to choose some, and each level is a
full compile of the CPU kernels (on 2 cores about 45 CPU-seconds each, against about 175 for
libllama and ggml's base; all fourteen were about 12 of the first install's 14 minutes). So
the pinned sdist (checked against its sha256) is patched before the build, in three places and
nowhere else:

- ggml's variant list keeps the levels given by `--variants`: the Makefile passes this
  machine's (`src/dragoman/engines/llama_variants.py`: its best, and `haswell` below it), or
  the portable set for a virtualenv that moves between machines. A CPU between two levels
  loads the lower one.
- llama.cpp's `common` library (the command-line tools' helpers, never loaded by the Python
  package) is not built; neither is `mtmd` (multimodal, `LLAVA_BUILD=OFF`).
- ggml's AMX kernels load their tile configuration at every matrix product, from static
  storage. As released they load it once per thread, from the stack, and both fault (SIGILL at a
  tile instruction): GCC before 14 declares `_tile_loadconfig` as reading 8 bytes of its 64-byte
  operand, so at -O2 it drops the stores of the tiles' rows and widths as dead (stores to a
  static object never are; llama.cpp PR 26954 makes the same change), and another library's AMX
  kernels on the same thread (oneDNN under CTranslate2 and PyTorch, onnxruntime's MLAS) leave
  their own configuration, or none, behind, which "once per thread" never loads over.

The compile runs under pip with its output in `<out>.log`; every 10 seconds it prints the
percentage done, an estimate of the time left and what is compiling.

    python scripts/build_llama_wheel.py --pip .venv/bin/pip --version 0.3.36 --sha256 HEX \\
        --variants haswell --cmake-args "-DGGML_NATIVE=OFF ..." --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

#: The x86 block under `if (GGML_CPU_ALL_VARIANTS)` in ggml/src/CMakeLists.txt, from its
#: opening line to the next architecture's.
_X86_BLOCK = re.compile(
    r'(if \(GGML_SYSTEM_ARCH STREQUAL "x86"\)\n)(.*?)(\n\s*elseif ?\(GGML_SYSTEM_ARCH STREQUAL "ARM"\))',
    re.DOTALL,
)
_VARIANT = re.compile(r"^\s*ggml_add_cpu_backend_variant\((\w+)[\s)]")
_COMMON_ON = 'set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
_COMMON_OFF = 'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "Build llama.cpp common library" FORCE)'
#: ggml's AMX tile configuration (ggml/src/ggml-cpu/amx/mmq.cpp): what is replaced, by what.
_TILE_CONFIG_PATCH = (
    ("    alignas(64) tile_config_t tc = {};", "    alignas(64) static thread_local tile_config_t tc = {};"),
    ("    static thread_local bool done = false;\n\n    if (done) {\n        return;\n    }\n", ""),
    ("    _tile_loadconfig(&tc);\n    done = true;\n", "    _tile_loadconfig(&tc);\n"),
)
#: Ninja's status line, which the build's verbose output starts each step with.
_STEP = re.compile(r"^\[(\d+)/(\d+)\] ")
#: A compile of one CPU variant's kernels (its objects lie under ggml-cpu-<variant>.dir).
_KERNEL = re.compile(r"\bggml-cpu-(\w+)\.dir/")


def keep_variants(cmake: str, wanted: set[str]) -> str:
    """ggml/src/CMakeLists.txt with only the `wanted` x86 CPU variants."""
    start = cmake.find("if (GGML_CPU_ALL_VARIANTS)")
    match = _X86_BLOCK.search(cmake, start) if start >= 0 else None
    if match is None:
        raise SystemExit("ggml's x86 CPU variant list was not found: the patch needs updating")
    kept: list[str] = []
    found: set[str] = set()
    for line in match.group(2).split("\n"):
        variant = _VARIANT.match(line)
        if variant is not None:
            found.add(variant.group(1))
            if variant.group(1) not in wanted:
                continue
        kept.append(line)
    if missing := wanted - found:
        raise SystemExit(
            f"ggml has no x86 CPU variant {', '.join(sorted(missing))} (it has {', '.join(sorted(found))})"
        )
    return cmake[: match.start(2)] + "\n".join(kept) + cmake[match.end(2) :]


def patch(source: Path, variants: set[str]) -> None:
    ggml = source / "vendor" / "llama.cpp" / "ggml" / "src" / "CMakeLists.txt"
    ggml.write_text(keep_variants(ggml.read_text(encoding="utf-8"), variants), encoding="utf-8")
    top = source / "CMakeLists.txt"
    text = top.read_text(encoding="utf-8")
    if _COMMON_ON not in text:
        raise SystemExit(
            "llama-cpp-python's CMakeLists no longer forces LLAMA_BUILD_COMMON: the patch needs updating"
        )
    top.write_text(text.replace(_COMMON_ON, _COMMON_OFF), encoding="utf-8")
    amx = source / "vendor" / "llama.cpp" / "ggml" / "src" / "ggml-cpu" / "amx" / "mmq.cpp"
    amx.write_text(tile_config_each_time(amx.read_text(encoding="utf-8")), encoding="utf-8")


def tile_config_each_time(mmq: str) -> str:
    """ggml's AMX kernels loading their tile configuration, from static storage, at every matrix
    product (see the module's doc)."""
    for before, after in _TILE_CONFIG_PATCH:
        if mmq.count(before) != 1:
            raise SystemExit("ggml's AMX tile configuration was not found: the patch needs updating")
        mmq = mmq.replace(before, after)
    return mmq


def fetch(pip: str, version: str, sha256: str, into: Path) -> Path:
    """The sdist from the package index, checked against its pinned sha256."""
    subprocess.run(
        [
            pip,
            "download",
            "--quiet",
            "--no-deps",
            # Only this package from source: `:all:` would build its build tools from source too.
            "--no-binary",
            "llama-cpp-python",
            "-d",
            str(into),
            f"llama-cpp-python=={version}",
        ],
        check=True,
    )
    (sdist,) = into.glob("llama_cpp_python-*.tar.gz")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{sdist.name} has sha256 {digest}, expected {sha256}")
    return sdist


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s"


class Progress:
    """Ninja's `[done/total]` step counter as a line every `every` seconds: percent, an estimate
    of the time left, and what is compiling (libllama and ggml's base, or a CPU variant's kernels).

    The estimate (from a tenth done on) assumes the remaining steps cost what the finished ones
    did on average; the kernels' files and libllama's larger ones cost more than the rest, so it
    swings by a minute or so on 2 cores, and says "about".
    """

    def __init__(self, every: float = 10.0) -> None:
        self.began = time.monotonic()
        self.every = every
        self.shown = -every
        self.now = "libllama and ggml"

    def line(self, text: str) -> str | None:
        """The progress line that `text` (one line of the build's output) calls for, if any."""
        step = _STEP.match(text.strip())
        if step is None:
            return None
        # Ninja prints each command as it starts it; the kernels' objects lie under their variant.
        kernel = _KERNEL.search(text)
        self.now = f"the {kernel.group(1)} kernels" if kernel else "libllama and ggml"
        done, total = int(step.group(1)), int(step.group(2))
        elapsed = time.monotonic() - self.began
        if elapsed - self.shown < self.every and done != total:
            return None
        self.shown = elapsed
        # The first steps say little of the rest: no estimate before a tenth is done.
        estimate = (
            f"about {_clock(elapsed / done * (total - done))} left" if done >= total / 10 else "estimating"
        )
        return (
            f"llama.cpp: {100 * done // total:3d}% ({done}/{total} steps), {_clock(elapsed)} so far,"
            f" {estimate} (compiling {self.now})"
        )


def build(pip: str, source: Path, cmake_args: str, out: Path, log_path: Path) -> None:
    """`pip wheel` the patched source into `out`, printing progress from ninja's step counter."""
    env = os.environ | {"CMAKE_ARGS": cmake_args}
    command = [pip, "wheel", "--no-deps", "--no-cache-dir", "-v", "-w", str(out), str(source)]
    progress = Progress()
    with log_path.open("w", encoding="utf-8") as log:
        # A session of its own, so that the compilers under pip, cmake and ninja stop with it
        # when this script is interrupted or `make install` stops it.
        process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                log.write(line)
                if (shown := progress.line(line)) is not None:
                    print(shown, file=sys.stderr, flush=True)
            returncode = process.wait()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait()
        if returncode != 0:
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            print("\n".join(tail), file=sys.stderr)
            raise SystemExit(f"building llama-cpp-python failed; the whole log is {log_path}")
    print(f"llama.cpp: built in {_clock(time.monotonic() - progress.began)}", file=sys.stderr)


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pip", required=True, help="the pip of the virtualenv that builds it")
    parser.add_argument("--version", required=True)
    parser.add_argument("--sha256", required=True, help="of the sdist")
    parser.add_argument("--variants", required=True, help="x86 CPU variants to build, comma-separated")
    parser.add_argument("--cmake-args", required=True)
    parser.add_argument("--out", required=True, type=Path, help="folder for the wheel")
    args = parser.parse_args()
    variants = {v.strip() for v in args.variants.split(",") if v.strip()}
    if not variants:
        raise SystemExit("--variants names no CPU variant")
    signal.signal(signal.SIGTERM, _stop)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llama-cpp-build-") as tmp:
        sdist = fetch(args.pip, args.version, args.sha256, Path(tmp))
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        source = Path(tmp) / sdist.name.removesuffix(".tar.gz")
        patch(source, variants)
        print(
            f"llama.cpp: building CPU kernels {', '.join(sorted(variants))} (the compile takes minutes)",
            file=sys.stderr,
            flush=True,
        )
        build(args.pip, source, args.cmake_args, args.out, args.out.with_suffix(".log"))


if __name__ == "__main__":
    main()
