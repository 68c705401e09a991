"""Fixtures shared by every test package: the model cache, read the way the server reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.config import load_settings


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """Where the assembled models live (`DRAGOMAN_CACHE_DIR`, else ~/.cache/dragoman)."""
    return load_settings().cache_dir
