"""A real Responses API for the tests: the LiteLLM proxy in front of `llama_cpp.server`.

llama-cpp-python's server has no `/v1/responses`. LiteLLM's proxy, a gateway used in
front of vLLM and llama.cpp deployments, serves OpenAI's Responses API and bridges it
to the upstream's chat completions (its `custom_openai/` provider), so the responses
backend meets a real server that streams real Responses events. The proxy lives in a
virtualenv of its own (`make litellm`, under ~/.cache), because its dependency pins
differ from the project's (websockets 15, for one).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.subprocess_server import answers, free_port, serving

#: Where `make litellm` installs the proxy (the Makefile exports this path).
DEFAULT_LITELLM = Path.home() / ".cache" / "dragoman-tools" / "litellm-1.108.7" / "bin" / "litellm"
START_TIMEOUT_S = 300.0
#: The proxy refuses to start without a master key; a request must then carry it.
MASTER_KEY = "sk-dragoman-tests"


def litellm_binary() -> Path | None:
    path = Path(os.environ.get("DRAGOMAN_LITELLM", DEFAULT_LITELLM))
    return path if path.is_file() else None


@contextmanager
def litellm_proxy(binary: Path, upstream: str, model: str, workdir: Path) -> Iterator[str]:
    """Serve `upstream`'s chat completions as `model` until the block ends; yields `/v1`'s URL."""
    port = free_port()
    config = workdir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {model}\n"
        "    litellm_params:\n"
        f"      model: custom_openai/{model}\n"
        f"      api_base: {upstream}\n"
        "      api_key: unused\n"
    )
    command = [str(binary), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_TELEMETRY": "False"}
    ready = functools.partial(answers, f"http://127.0.0.1:{port}/health/liveliness", timeout=5)
    log = workdir / "litellm.log"
    with serving("litellm", command, log, ready, START_TIMEOUT_S, grace=30, interval=0.5, env=env):
        yield f"http://127.0.0.1:{port}/v1"
