"""One llama.cpp model per GGUF file in the process, shared by every engine that runs it.

The MT engine and the voice agent's LLM both run the packaged Qwen2.5 1.5B (or both
the 0.5B). llama.cpp keeps a model's weights apart from its contexts: a context holds
its own KV cache, batch and threads, and several contexts may decode on one model at
once from different threads, the weights being read only. So each engine makes its
own context, and the model under them is loaded once (`acquire`) and freed when the
last engine lets it go (`release`), instead of holding the 1.5B's 1.1 GB of weights
twice (server memory with one copy and with two: bench/RESULTS.md).

`ModelContext` is how an engine opens a GGUF: the CPU kernels (`llama_backend`), the
shared model, and a context of its own on it, all let go by one `close`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dragoman.errors import EngineFailure
from dragoman.logs import get_logger

if TYPE_CHECKING:
    from dragoman.engines.llama_backend import Backend
    from dragoman.engines.llama_native import ContextSpec, NativeContext, NativeModel, NodeFilter

log = get_logger(__name__)


@dataclass
class _Entry:
    model: Any
    users: int


class SharedModels:
    """Models by file, counted by users; `load` builds one from a path."""

    def __init__(self, load: Callable[[Path], Any], free: Callable[[Any], None]) -> None:
        self._load = load
        self._free = free
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        #: Models loaded so far (a shared one counts once).
        self.loads = 0

    @staticmethod
    def key(path: Path) -> str:
        """The file, however it is named (a link into the cache, a relative path)."""
        return os.path.realpath(path)

    def acquire(self, path: Path) -> Any:
        key = self.key(path)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = _Entry(self._load(Path(key)), 0)
                self._entries[key] = entry
                self.loads += 1
            else:
                log.info("llama.cpp model shared", model=Path(key).name, users=entry.users + 1)
            entry.users += 1
            return entry.model

    def release(self, model: Any) -> None:
        with self._lock:
            for key, entry in self._entries.items():
                if entry.model is model:
                    entry.users -= 1
                    if entry.users == 0:
                        del self._entries[key]
                        self._free(model)
                    return

    def users(self, path: Path) -> int:
        entry = self._entries.get(self.key(path))
        return entry.users if entry is not None else 0


def _load(path: Path) -> NativeModel:
    from dragoman.engines.llama_native import load_model

    return load_model(path)


def _free(model: NativeModel) -> None:
    model.close()


#: The process's models.
MODELS = SharedModels(_load, _free)


def acquire(path: Path) -> NativeModel:
    """The model of the GGUF at `path` (`llama_native.NativeModel`), loaded once; `release` it."""
    model: NativeModel = MODELS.acquire(path)
    return model


def release(model: NativeModel) -> None:
    MODELS.release(model)


class ModelContext:
    """A llama.cpp context on the shared model of the GGUF at `path`; `close` lets both go.

    `node_filter`: the context's eval callback (`engines.mt.llama_tap`).
    """

    def __init__(self, path: Path, spec: ContextSpec, node_filter: NodeFilter | None = None) -> None:
        from dragoman.engines.llama_backend import load_backend
        from dragoman.engines.llama_native import NativeContext

        self.backend: Backend = load_backend()
        self.model = acquire(path)
        try:
            self.context: NativeContext = NativeContext(self.model, spec, node_filter)
        except EngineFailure:
            release(self.model)
            raise
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            self.context.close()
            release(self.model)
