"""The voices of another server: OpenAI's `POST /v1/audio/speech`, streamed as raw PCM.

Served by OpenAI, vLLM's speech models, Kokoro-FastAPI, speaches and dragoman itself
(`transports/speech.py`), so a fleet of front-ends can leave speech to TTS nodes
(`tts.base_url`). Each clause is one request with `response_format: "pcm"` (24 kHz, 16-bit
little-endian mono), read as it arrives and handed on in chunks; a cancelled clause closes its
response, so the remote server stops too.

Failures: a connect is retried a bounded number of times (httpx's transport retries connects
only: a request that reached the server is never sent twice); a server that cannot be reached
or does not answer within `timeout_s` is `TTSServerUnavailable`, one that answers with an error
`TTSServerError`, both server faults that reach the client only as an error id. The names of
voices are the catalog's (`voices.py`): a client's own name (an OpenAI voice, or one only the
remote server knows) is passed on as given, so a remote dragoman maps it as this one would, and
OpenAI reads it as its own.
"""

from __future__ import annotations

import httpx
import numpy as np

from dragoman.config import TTSSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.remote import safe_url
from dragoman.engines.tts.base import Emit, SpeechRequest, TTSCapabilities
from dragoman.engines.tts.voices import REMOTE, VoiceCatalog
from dragoman.engines.workers import CancelToken
from dragoman.errors import EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)

#: OpenAI's `pcm`: 24 kHz, 16-bit, mono.
RATE = 24_000
#: Bytes read per chunk handed on: 100 ms of audio.
CHUNK_BYTES = RATE // 10 * 2
BACKEND = REMOTE


class TTSServerUnavailable(EngineFailure):
    """The TTS server cannot be reached or did not answer in time."""

    code = "tts_server_unavailable"


class TTSServerError(EngineFailure):
    """The TTS server answered with an error."""

    code = "tts_server_error"


class OpenAISpeech:
    """A TTSEngine whose voices run on the server at `settings.base_url`."""

    def __init__(self, settings: TTSSettings) -> None:
        if not settings.base_url:
            raise ValueError("the remote TTS backend needs tts.base_url")
        self.name = BACKEND
        self.where = safe_url(settings.base_url)
        self.model = settings.remote_model
        self.default_voice = settings.voice
        catalog = VoiceCatalog(settings.backends, settings.voice)
        self.capabilities = TTSCapabilities(RATE, catalog.languages, catalog.names)
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s, connect=min(5.0, settings.timeout_s)),
            transport=httpx.HTTPTransport(retries=settings.connect_retries),
        )

    def synthesize(self, request: SpeechRequest, cancel: CancelToken, emit: Emit) -> None:
        body = {
            "model": self.model,
            "input": request.text,
            "voice": request.voice,
            "response_format": "pcm",
            "speed": request.speed,
        }
        try:
            with self._client.stream("POST", "audio/speech", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise TTSServerError(
                        f"the TTS server at {self.where} answered HTTP {response.status_code}: "
                        f"{response.text[:300]}"
                    )
                leftover = b""
                for data in response.iter_bytes(CHUNK_BYTES):
                    if cancel.cancelled:
                        return  # leaving the block closes the response: the server stops too
                    data = leftover + data
                    whole = len(data) - len(data) % 2
                    leftover = data[whole:]
                    if whole:
                        samples = np.frombuffer(data[:whole], dtype="<i2").astype(np.float32) / 32768.0
                        emit(samples)
        except httpx.TimeoutException as exc:
            raise TTSServerUnavailable(f"the TTS server at {self.where} did not answer in time") from exc
        except httpx.TransportError as exc:
            raise TTSServerUnavailable(f"the TTS server at {self.where} cannot be reached: {exc}") from exc

    def warm_up(self) -> None:
        """One short clause, so that a server that is down shows in the log at start-up; the
        server starts anyway: sessions that need no voice are not held up by it."""
        request = SpeechRequest(
            "Hello.", self.capabilities.voices[0] if self.capabilities.voices else "alloy"
        )
        try:
            self.synthesize(request, CancelToken(), lambda _: None)
        except EngineFailure as exc:
            log.warning("the remote TTS server failed its warm-up", where=self.where, error=exc.message)

    def describe(self) -> EngineInfo:
        return EngineInfo(name=f"{self.model}@{self.where}", backend=BACKEND, device="remote")

    def close(self) -> None:
        self._client.close()
