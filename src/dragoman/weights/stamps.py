"""The `.verified` stamp of a model folder: what was hashed, so a start-up need not hash it again.

Each entry records a file's path, size, mtime and sha256; a file whose entry still matches
is taken as verified without re-hashing hundreds of MB. Separate from `install`, which
decides when to trust a stamp and when to hash: this is only the record and its format.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dragoman.logs import get_logger
from dragoman.weights.specs import FileSpec

log = get_logger(__name__)

#: The stamp's file name in a model folder.
STAMP = ".verified"


def read_stamps(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_stamps(folder: Path, stamps: Mapping[str, Any]) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".verified.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(stamps, out, indent=1, sort_keys=True)
        os.replace(tmp, folder / STAMP)
    except OSError as exc:
        # Only costs a re-hash on the next start; not worth failing for.
        log.warning("cannot write model stamp", folder=str(folder), error=str(exc))


def stamp_for(path: Path, digest: str) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}


def stamp_ok(entry: Any, path: Path, f: FileSpec) -> bool:
    if not isinstance(entry, dict):
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    return (
        entry.get("path") == str(path)
        and entry.get("size") == st.st_size == f.size
        and entry.get("mtime_ns") == st.st_mtime_ns
        and entry.get("sha256") == f.sha256
    )
