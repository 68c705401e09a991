"""A real OpenAI-compatible LLM server for the tests and benchmarks: `python -m llama_cpp.server`
on a free port.

llama-cpp-python's own server serves the packaged GGUF with `/v1/models` and
`/v1/chat/completions`, as vLLM or a llama.cpp server would for a deployment that
moves its LLM onto other machines.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.subprocess_server import answers, free_port, serving

#: Loading the model and the first request take seconds; a busy 2-core machine makes it minutes.
START_TIMEOUT_S = 300.0


#: `python -m llama_cpp.server`, after loading the CPU kernels this CPU runs best: ggml looks
#: for them only beside the executable and in the working directory (`engines.llama_backend`).
_SERVE = (
    "import runpy; from dragoman.engines.llama_backend import load_backend; load_backend(); "
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)"
)


@contextmanager
def llama_server(model: Path, log_path: Path, threads: int = 2, interrupt: bool = True) -> Iterator[str]:
    """Serve `model` until the block ends; yields the server's `/v1` base URL. With `interrupt`
    (llama_cpp.server's default) a new request ends the stream under way; without, requests
    wait their turn, as several clients of one server need."""
    port = free_port()
    command = [sys.executable, "-c", _SERVE, "--model", str(model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads), "--n_ctx", "4096"]
    command += ["--interrupt_requests", str(interrupt)]
    url = f"http://127.0.0.1:{port}/v1"
    ready = functools.partial(answers, f"{url}/models", timeout=5)
    with serving("llama_cpp.server", command, log_path, ready, START_TIMEOUT_S, grace=30, interval=0.5):
        yield url
