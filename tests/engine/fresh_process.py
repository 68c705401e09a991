"""A script in a fresh interpreter, for the engine tests of llama.cpp's CPU kernels: a process
loads its kernels once, so each case that chooses them runs apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_json(script: str, cache_dir: Path, **env: str) -> dict[str, Any]:
    """Run `script` with the cache folder as its argument and `env` added; its last line, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(cache_dir)],
        env=dict(os.environ) | env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer
