"""Assemble, verify and locate the packaged models.

A model's files come out of installed PyPI packages, found with importlib (never a
hard-coded site-packages path). Files split into parts are concatenated in order
into `<cache_dir>/models/<name>/`, streamed through sha256 into a temporary file
that is renamed into place only once its hash matches, so a crash never leaves a
half-written model behind. A model whose files sit in one package folder as they
are is used in place. Parts inside an npm tarball (weights/npm.py) are fetched only by
`install`, never by `resolve`. A `.verified` stamp (path, size, mtime, sha256 of each file)
lets a start-up skip re-hashing hundreds of MB (weights/stamps.py); `verify` always recomputes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger
from dragoman.weights import npm
from dragoman.weights.registry import MODELS
from dragoman.weights.specs import FileSpec, ModelSpec, NpmFile, PackageFile, Part
from dragoman.weights.stamps import STAMP, read_stamps, stamp_for, stamp_ok, write_stamps

log = get_logger(__name__)

#: progress(label, bytes_done, bytes_total), called as long work advances.
Progress = Callable[[str, int, int], None]

_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelStatus:
    name: str
    role: str
    description: str
    #: Every file is present where the model is used from.
    installed: bool
    #: Every file's hash matched (the stamp for `list_models`, a fresh hash for `verify`).
    verified: bool
    #: What `resolve` returns: the model folder, or the file of a single-file model.
    path: Path | None
    size: int
    problem: str | None = None
    #: Not part of `make install`; absent, it is no failure.
    optional: bool = False
    #: How to get the model's packages.
    install_hint: str = "make install"

    @property
    def state(self) -> str:
        """What `dragoman models` shows: verified, installed or missing (with how to install it)."""
        if self.verified:
            return "verified"
        if self.installed:
            return "installed"
        return f"missing (optional: {self.install_hint})" if self.optional else "missing"

    @property
    def ok(self) -> bool:
        """Usable as installed, or an optional model that simply is not there."""
        return self.verified or (self.optional and not self.installed)


@dataclass(frozen=True)
class _Layout:
    root: Path
    folder: Path
    files: dict[str, Path]
    in_place: bool


def model_dir(cache_dir: Path, name: str) -> Path:
    return Path(cache_dir).expanduser() / "models" / name


def _locate(part: PackageFile) -> Path | None:
    """The part's file on disk, or None when its package is not installed."""
    try:
        spec = importlib.util.find_spec(part.package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / part.path
        if candidate.is_file():
            return candidate
    return None


def _in_place_folder(spec: ModelSpec) -> Path | None:
    """The package folder that holds every file of the model as is, if there is one."""
    folders: set[Path] = set()
    for f in spec.files:
        part = f.parts[0]
        if f.assembled or not isinstance(part, PackageFile) or PurePosixPath(part.path).name != f.name:
            return None
        found = _locate(part)
        if found is None:
            return None
        folders.add(found.parent)
    return folders.pop() if len(folders) == 1 else None


def _layout(spec: ModelSpec, cache_dir: Path) -> _Layout:
    stamp_folder = model_dir(cache_dir, spec.name)
    package_folder = _in_place_folder(spec)
    folder = package_folder or stamp_folder
    files = {f.name: folder / f.name for f in spec.files}
    root = files[spec.files[0].name] if spec.layout == "file" else folder
    return _Layout(root=root, folder=stamp_folder, files=files, in_place=package_folder is not None)


def _missing_packages(spec: ModelSpec) -> ModelUnavailable:
    needed = " ".join(spec.distributions)
    return ModelUnavailable(
        f"model {spec.name!r} needs the packages {needed}, which are not all installed; "
        f"run `{spec.install_hint}` (or `pip install {needed}`)"
    )


@contextmanager
def _open_part(spec: ModelSpec, part: Part, cache_dir: Path, fetch: bool) -> Iterator[IO[bytes]]:
    if isinstance(part, PackageFile):
        path = _locate(part)
        if path is None:
            raise _missing_packages(spec)
        with path.open("rb") as src:
            yield src
    else:
        with npm.open_member(part, cache_dir, fetch=fetch) as src:
            yield src


# -- hashing and assembly -------------------------------------------------------------


def _hash_file(path: Path, label: str, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(label, done, total)
    return digest.hexdigest()


def _assemble(
    spec: ModelSpec, f: FileSpec, target: Path, progress: Progress | None, cache_dir: Path, fetch: bool
) -> None:
    """Concatenate the parts into `target` through a temporary file, checking the hash first."""
    if any(isinstance(part, PackageFile) and _locate(part) is None for part in f.parts):
        raise _missing_packages(spec)
    for package in dict.fromkeys(p.package for p in f.parts if isinstance(p, NpmFile)):
        npm.tarball(package, cache_dir, fetch=fetch)  # fetched and checked before anything is written
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{f.name}.", suffix=".tmp")
    except OSError as exc:
        raise ModelUnavailable(
            f"cannot write model {spec.name!r} into {target.parent}: {exc.strerror}; "
            "point DRAGOMAN_CACHE_DIR at a writable folder"
        ) from exc
    tmp = Path(tmp_name)
    label = f"{spec.name}/{f.name}"
    started = time.monotonic()
    log.info("assembling model file", model=spec.name, file=f.name, parts=len(f.parts), size=f.size)
    try:
        digest = hashlib.sha256()
        done = 0
        with os.fdopen(fd, "wb") as out:
            for source in f.parts:
                with _open_part(spec, source, cache_dir, fetch) as part:
                    while chunk := part.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(label, done, f.size)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp makes the file private; a model cache is often shared (CI, several users).
        tmp.chmod(0o644)
        if digest.hexdigest() != f.sha256:
            raise ModelUnavailable(
                f"model {spec.name!r}: {f.name} assembled from {' + '.join(p.path for p in f.parts)} "
                f"has sha256 {digest.hexdigest()}, expected {f.sha256}; the packages are damaged or "
                f"of another version: reinstall {' '.join(spec.distributions)} (`make install`)"
            )
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    log.info("model file ready", model=spec.name, file=f.name, seconds=round(time.monotonic() - started, 2))


def _install_one(spec: ModelSpec, cache_dir: Path, progress: Progress | None, *, fetch: bool) -> Path:
    """The model's root, assembled and verified; `fetch` lets npm parts be downloaded (install only)."""
    layout = _layout(spec, cache_dir)
    stamps = read_stamps(layout.folder)
    changed = False
    for f in spec.files:
        path = layout.files[f.name]
        # A verified copy in the shared cache serves even when the packages are gone.
        if stamp_ok(stamps.get(f.name), path, f):
            continue
        if (
            path.is_file()
            and path.stat().st_size == f.size
            and _hash_file(path, f"verify {spec.name}/{f.name}", progress) == f.sha256
        ):
            stamps[f.name] = stamp_for(path, f.sha256)
            changed = True
            continue
        if layout.in_place:
            # Never write into a package folder; the package itself is damaged.
            raise ModelUnavailable(
                f"model {spec.name!r}: {path.name} in its package fails its sha256 check; "
                f"reinstall {' '.join(spec.distributions)} (`make install`)"
            )
        if path.exists():
            log.warning("model file fails its checksum; rebuilding", model=spec.name, file=f.name)
        _assemble(spec, f, path, progress, cache_dir, fetch)
        stamps[f.name] = stamp_for(path, f.sha256)
        changed = True
    if changed:
        write_stamps(layout.folder, stamps)
    return layout.root


def _select(names: Iterable[str] | None, registry: Mapping[str, ModelSpec]) -> list[ModelSpec]:
    """The named models; by default every model that is not optional."""
    if names is None:
        return [spec for spec in registry.values() if not spec.optional]
    chosen = []
    for name in names:
        spec = registry.get(name)
        if spec is None:
            raise ConfigError(f"unknown model {name!r}; packaged models: {', '.join(sorted(registry))}")
        chosen.append(spec)
    return chosen


# -- public API -----------------------------------------------------------------------


def list_models(cache_dir: Path, *, registry: Mapping[str, ModelSpec] = MODELS) -> list[ModelStatus]:
    """Every packaged model and where it stands, from the stamps alone (no hashing)."""
    out = []
    for spec in registry.values():
        layout = _layout(spec, cache_dir)
        present = all(p.is_file() for p in layout.files.values())
        stamps = read_stamps(layout.folder)
        verified = present and all(stamp_ok(stamps.get(f.name), layout.files[f.name], f) for f in spec.files)
        out.append(
            ModelStatus(
                spec.name,
                spec.role,
                spec.description,
                present,
                verified,
                layout.root,
                spec.size,
                optional=spec.optional,
                install_hint=spec.install_hint,
            )
        )
    return out


def install(
    cache_dir: Path,
    names: Sequence[str] | None = None,
    progress: Progress | None = None,
    *,
    registry: Mapping[str, ModelSpec] = MODELS,
) -> list[Path]:
    """Make the models usable (all but the optional ones when `names` is None); their paths in order.

    Raises `ModelUnavailable` when a package is missing or a file fails its checksum,
    and `ConfigError` for a name that is not a packaged model. npm parts are fetched here.
    """
    return [_install_one(spec, Path(cache_dir), progress, fetch=True) for spec in _select(names, registry)]


def verify(
    cache_dir: Path,
    names: Sequence[str] | None = None,
    progress: Progress | None = None,
    *,
    registry: Mapping[str, ModelSpec] = MODELS,
) -> list[ModelStatus]:
    """Recompute every installed file's sha256; stamps are rewritten to match what was found.

    By default: every model that is not optional, and the optional ones that are installed.
    """
    chosen = _select(names, registry)
    if names is None:
        chosen += [
            spec
            for spec in registry.values()
            if spec.optional and any(p.is_file() for p in _layout(spec, Path(cache_dir)).files.values())
        ]
    out = []
    for spec in chosen:
        layout = _layout(spec, Path(cache_dir))
        stamps: dict[str, Any] = {}
        problems = []
        for f in spec.files:
            path = layout.files[f.name]
            if not path.is_file():
                problems.append(f"{f.name} missing")
                continue
            digest = _hash_file(path, f"verify {spec.name}/{f.name}", progress)
            if digest == f.sha256:
                stamps[f.name] = stamp_for(path, digest)
            else:
                problems.append(f"{f.name} has sha256 {digest}, expected {f.sha256}")
        if stamps or (layout.folder / STAMP).exists():
            write_stamps(layout.folder, stamps)
        installed = not any(p.endswith("missing") for p in problems)
        if problems:
            log.warning("model verification failed", model=spec.name, problems=problems)
        out.append(
            ModelStatus(
                spec.name,
                spec.role,
                spec.description,
                installed,
                not problems,
                layout.root,
                spec.size,
                "; ".join(problems) or None,
                optional=spec.optional,
                install_hint=spec.install_hint,
            )
        )
    return out


def resolve(
    name_or_path: str,
    cache_dir: Path,
    *,
    role: str | None = None,
    registry: Mapping[str, ModelSpec] = MODELS,
) -> Path:
    """A packaged model's name -> its folder (or file), installed on demand; a local path -> itself.

    A local path is the way to serve the user's own weights, e.g. a CTranslate2
    Whisper small or large-v3 folder. Registry names win over relative paths of the
    same spelling; write `./whisper-base` to mean a folder.
    """
    spec = registry.get(name_or_path)
    if spec is not None:
        if role is not None and spec.role != role:
            raise ConfigError(f"model {spec.name!r} is a {spec.role} model, not {role}")
        return _install_one(spec, Path(cache_dir), None, fetch=False)
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path.resolve()
    known = ", ".join(sorted(n for n, s in registry.items() if role is None or s.role == role))
    raise ModelUnavailable(
        f"model {name_or_path!r} is neither a packaged model ({known}) nor an existing path"
    )


def gguf_file(path: Path) -> Path:
    """The GGUF a resolved model names: `path` itself, or the one .gguf in the folder `path`."""
    if not path.is_dir():
        return path
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) != 1:
        raise ModelUnavailable(f"{path} holds {len(ggufs)} .gguf files; name the file itself")
    return ggufs[0]
