"""Alignment-heads files: which (layer, head) pairs of a model align target to source.

A heads file is written by calibration (`dragoman.engines.mt.head_selection`) for one
model and one direction and read by the MT engine, which averages the attention
of those heads into the per-token source-word alignment AlignAtt needs. The
packaged files live in `dragoman/data/heads/<model>/<direction>.json`; a folder
given in `mt.heads_dir` (same layout) is searched first, so a user's own
calibration overrides the shipped one. "The server validates the direction
against the calibrated alignment-heads files it ships" (MT protocol v1), so the
files present are also the list of supported directions.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from dragoman.errors import ConfigError

FORMAT_VERSION = 1

_DIRECTION = re.compile(r"^([a-z]{2,3})-([a-z]{2,3})$")


@dataclass(frozen=True)
class Head:
    layer: int
    head: int
    #: Calibration score (higher is better); informative only.
    score: float = 0.0
    #: The score's parts (anchor agreement, monotonicity, ...), for the record.
    details: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class HeadsFile:
    model: str
    direction: str
    heads: tuple[Head, ...]
    #: sha256 of the model file the heads were calibrated on, when known.
    model_sha256: str | None = None
    #: How the heads were chosen: data, number of sentences, date, method.
    calibration: Mapping[str, Any] = field(default_factory=dict)

    def pairs(self) -> list[tuple[int, int]]:
        return [(h.layer, h.head) for h in self.heads]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "model": self.model,
            "model_sha256": self.model_sha256,
            "direction": self.direction,
            "heads": [
                {"layer": h.layer, "head": h.head, "score": round(h.score, 4), **dict(h.details)}
                for h in self.heads
            ],
            "calibration": dict(self.calibration),
        }


def split_direction(direction: str) -> tuple[str, str]:
    """Split "en-de" into ("en", "de"); raises ConfigError for anything else."""
    match = _DIRECTION.match(direction)
    if match is None:
        raise ConfigError(f"a direction is two language codes joined by '-', e.g. en-de; got {direction!r}")
    return match.group(1), match.group(2)


def parse(data: Mapping[str, Any], origin: str) -> HeadsFile:
    """Validate a heads file's JSON; ConfigError names `origin` when it is malformed."""
    try:
        if int(data.get("format", FORMAT_VERSION)) != FORMAT_VERSION:
            raise ValueError(f"unknown format {data.get('format')!r}")
        heads = tuple(
            Head(
                layer=int(item["layer"]),
                head=int(item["head"]),
                score=float(item.get("score", 0.0)),
                details={
                    k: float(v)
                    for k, v in item.items()
                    if k not in ("layer", "head", "score") and isinstance(v, int | float)
                },
            )
            for item in data["heads"]
        )
        if not heads or any(h.layer < 0 or h.head < 0 for h in heads):
            raise ValueError("needs at least one head, with non-negative layer and head")
        direction = str(data["direction"])
        split_direction(direction)
        sha = data.get("model_sha256")
        return HeadsFile(
            model=str(data["model"]),
            direction=direction,
            heads=heads,
            model_sha256=str(sha) if sha else None,
            calibration=dict(data.get("calibration") or {}),
        )
    except (KeyError, TypeError, ValueError, ConfigError) as exc:
        raise ConfigError(f"malformed alignment-heads file {origin}: {exc}") from exc


def load(path: Path) -> HeadsFile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read alignment-heads file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"malformed alignment-heads file {path}: not a JSON object")
    return parse(data, str(path))


def save(heads: HeadsFile, path: Path) -> Path:
    """Write atomically (temporary file, then rename), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(heads.to_json(), out, indent=2, ensure_ascii=False)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def packaged_dir() -> Path:
    """The shipped heads folder, `dragoman/data/heads`."""
    return Path(str(resources.files("dragoman"))) / "data" / "heads"


def search_dirs(extra: Path | None, cache_dir: Path | None = None) -> list[Path]:
    """Folders searched for `<model>/<direction>.json`: `extra` (mt.heads_dir), then
    `<cache_dir>/heads` (where `dragoman mt calibrate` writes by default), then the packaged ones."""
    dirs = [Path(extra).expanduser()] if extra is not None else []
    if cache_dir is not None:
        dirs.append(Path(cache_dir).expanduser() / "heads")
    return [*dirs, packaged_dir()]


def find(model: str, direction: str, dirs: Sequence[Path]) -> HeadsFile | None:
    """The first heads file for `model` and `direction` in `dirs`, or None."""
    for folder in dirs:
        path = folder / model / f"{direction}.json"
        if path.is_file():
            return load(path)
    return None


def directions(model: str, dirs: Iterable[Path]) -> list[str]:
    """Directions with a heads file for `model` in any of `dirs`, sorted."""
    found: set[str] = set()
    for folder in dirs:
        model_dir = folder / model
        if model_dir.is_dir():
            found.update(p.stem for p in model_dir.glob("*.json") if _DIRECTION.match(p.stem))
    return sorted(found)
