"""WhisperLiveKit's AlignAtt client loaded unchanged, and what test_mt_e2e needs around it.

The `mt_server` and `frames` fixtures that use these live in tests/e2e/conftest.py.

WhisperLiveKit's package `__init__` imports its whole ASR stack; the MT client needs
only `translation_alignatt.py` and `timed_objects.py`, so they are imported under
a stand-in parent package that has the real folder as its path and no `__init__`
code. The frames the client exchanges are recorded by wrapping
`websockets.sync.client.connect`, which the client looks up at every connect.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
import websockets.sync.client

from dragoman.tools import eval_set

FLORES = eval_set.eval_path(eval_set.FLORES)
MT_PRESET = "low_latency"
MT_MAX_SESSIONS = 2


def load_whisperlivekit_client() -> tuple[types.ModuleType, types.ModuleType]:
    """(translation_alignatt, timed_objects) from the installed whisperlivekit, without its `__init__`."""
    spec = importlib.util.find_spec("whisperlivekit")
    if spec is None or spec.origin is None:
        pytest.skip("whisperlivekit is not installed (make install)")
    names = ["whisperlivekit", "whisperlivekit.timed_objects", "whisperlivekit.translation_alignatt"]
    saved = {name: sys.modules.get(name) for name in names}
    if saved["whisperlivekit"] is None:
        stand_in = types.ModuleType("whisperlivekit")
        stand_in.__path__ = [str(Path(spec.origin).parent)]
        sys.modules["whisperlivekit"] = stand_in
    try:
        timed = importlib.import_module("whisperlivekit.timed_objects")
        client = importlib.import_module("whisperlivekit.translation_alignatt")
    finally:  # leave sys.modules as it was, so a later real import of the package still works
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return client, timed


def flores(lines: list[int]) -> list[tuple[str, str]]:
    """(English, German) of FLORES devtest lines, by their `line` number."""
    with FLORES.open(encoding="utf-8", newline="") as handle:
        rows = {int(row["line"]): row for row in csv.DictReader(handle, delimiter="\t")}
    return [(rows[n]["eng_Latn"], rows[n]["deu_Latn"]) for n in lines]


class RecordedConnection:
    def __init__(self, connection: Any, frames: list[tuple[str, dict[str, Any]]]) -> None:
        self._connection = connection
        self.frames = frames

    def send(self, message: str) -> None:
        self.frames.append(("sent", json.loads(message) | {"_at": time.monotonic()}))
        self._connection.send(message)

    def recv(self, timeout: float | None = None) -> str:
        message = self._connection.recv(timeout=timeout)
        self.frames.append(("received", json.loads(message) | {"_at": time.monotonic()}))
        return str(message)

    def close(self) -> None:
        self._connection.close()


class FrameRecorder:
    """Every connection the client opens, as the list of frames it sent and received."""

    def __init__(self) -> None:
        self.connections: list[list[tuple[str, dict[str, Any]]]] = []
        self._open: list[RecordedConnection] = []
        self._connect = websockets.sync.client.connect

    def connect(self, url: str, **kwargs: Any) -> RecordedConnection:
        frames: list[tuple[str, dict[str, Any]]] = []
        self.connections.append(frames)
        connection = RecordedConnection(self._connect(url, **kwargs), frames)
        self._open.append(connection)
        return connection

    def drop(self, connection: int) -> None:
        """Close a connection under the client, as a network failure would."""
        self._open[connection].close()

    def close_all(self) -> None:
        """End the client's sessions (its client has no close method)."""
        for connection in self._open:
            connection.close()

    def received(self, connection: int | None = None) -> list[dict[str, Any]]:
        chosen = self.connections if connection is None else [self.connections[connection]]
        return [frame for frames in chosen for way, frame in frames if way == "received"]

    def timings(self, connection: int = 0) -> list[tuple[str, float]]:
        """(what was answered, seconds it took) for each answer the client waited for."""
        out: list[tuple[str, float]] = []
        sent_at: float | None = None
        what = ""
        for way, frame in self.connections[connection]:
            if way == "sent":
                sent_at = frame["_at"]
                what = f"{frame['type']} seq={frame.get('seq')} final={frame.get('is_final')}"
            elif sent_at is not None:
                out.append((what, round(frame["_at"] - sent_at, 2)))
                sent_at = None
        return out

    def sent(self, connection: int) -> list[dict[str, Any]]:
        return [frame for way, frame in self.connections[connection] if way == "sent"]
