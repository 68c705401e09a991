"""What the remote LLM backends share: the `openai` client, the model name, and errors.

A remote backend talks to an OpenAI-compatible server (vLLM, llama.cpp's server,
OpenAI) with the `openai` SDK. Its failures become `ServerError`s whose message
names the server by its address with any credentials cut out; the SDK's own
exception text, which may quote the request, only goes to the log as the cause.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import openai

from dragoman.config import LLMSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.base import ContextLengthExceeded, LLMCapabilities
from dragoman.errors import ConfigError, EngineFailure


class LLMServerUnavailable(EngineFailure):
    """The LLM server cannot be reached or did not answer in time."""

    code = "llm_server_unavailable"


class LLMServerError(EngineFailure):
    """The LLM server answered with an error."""

    code = "llm_server_error"


def safe_url(url: str) -> str:
    """`url` without user, password, query or fragment: safe for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class RemoteClient:
    """The SDK client of one server, and the model it serves (asked of the server when unset)."""

    def __init__(self, settings: LLMSettings, backend: str) -> None:
        if not settings.base_url:
            raise ConfigError(f"the {backend} LLM backend needs llm.base_url")
        self.backend = backend
        self.where = safe_url(settings.base_url)
        self.client = openai.OpenAI(
            base_url=settings.base_url,
            # The SDK insists on a key; servers without authentication ignore this one.
            api_key=settings.api_key or "unused",
            timeout=settings.timeout_s,
            max_retries=1,
        )
        self._model = settings.remote_model
        self._lock = threading.Lock()
        self.capabilities = LLMCapabilities(
            tools=True,
            # The server may constrain arguments (vLLM does with `tool_choice` set) but does not say.
            constrained_arguments=False,
            prefix_cache=False,
            context_tokens=settings.context_tokens,
            remote=True,
        )

    @property
    def model(self) -> str:
        """The model to ask for: `llm.remote_model`, else the first the server lists."""
        with self._lock:
            if not self._model:
                with self.errors():
                    listed = self.client.models.list()
                    first = next(iter(listed), None)
                if first is None:
                    raise LLMServerError(f"the LLM server at {self.where} lists no model")
                self._model = first.id
            return self._model

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Turn the SDK's exceptions into the project's, with clean messages."""
        try:
            yield
        except openai.APITimeoutError as exc:
            raise LLMServerUnavailable(f"the LLM server at {self.where} did not answer in time") from exc
        except openai.APIConnectionError as exc:
            raise LLMServerUnavailable(f"the LLM server at {self.where} cannot be reached") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 400 and _says_context(exc):
                raise ContextLengthExceeded(
                    "the conversation does not fit the model's context", param="messages"
                ) from exc
            raise LLMServerError(f"the LLM server at {self.where} answered HTTP {exc.status_code}") from exc
        except openai.OpenAIError as exc:
            raise LLMServerError(
                f"the LLM server at {self.where} sent an answer that cannot be read"
            ) from exc

    def describe(self, name: str) -> EngineInfo:
        return EngineInfo(
            name=name, backend=self.backend, device="remote", compute_type="remote", compute_reason=self.where
        )

    def close(self) -> None:
        self.client.close()


def _says_context(exc: openai.APIStatusError) -> bool:
    text = str(exc).lower()
    return "context" in text and ("length" in text or "window" in text or "maximum" in text)
