"""The ASR engine interface.

An engine transcribes a batch of step requests in one call. A step request is the
re-decode algorithm's unit of work: the item's whole audio so far plus the text the
hypothesis must start with (the stable prefix). How that prefix reaches the model
is the backend's business and is declared in `ASRCapabilities.prefix_mode`: Whisper
puts its tokens after `<|notimestamps|>` in the decoder prompt; a chat model served
remotely (e.g. vLLM serving Qwen3-ASR) prefills the assistant turn with it.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.engines.info import EngineInfo
from dragoman.errors import ClientError

FloatAudio = npt.NDArray[np.float32]


class TextTokenizer(Protocol):
    """The engine's text tokenizer, used to cut the stable prefix at token boundaries."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def call_layout(threads: int, parallel_calls: int, *, cpu: bool = True) -> tuple[int, int]:
    """(calls at once, threads a call) for an engine given `threads` in all (at least 1).

    `parallel_calls` 0 means: on a CPU, one call per thread, since a decoder step's small
    matrix products gain little from a second thread while a second call doubles the steps
    (bench/RESULTS.md); elsewhere one call on all the threads.
    """
    calls = parallel_calls or (threads if cpu else 1)
    return calls, max(1, threads // calls)


class PrefixMode(StrEnum):
    #: The prefix's tokens follow the task tokens in the decoder prompt (Whisper).
    DECODER_PROMPT = "decoder_prompt"
    #: The prefix is the start of the assistant turn of a chat request (Qwen3-ASR on vLLM).
    ASSISTANT_PREFILL = "assistant_prefill"
    #: The server cannot be given one; the prefix is kept on this side by aligning each new
    #: hypothesis with it (OpenAI's /v1/audio/transcriptions: `word_agreement.py`).
    CLIENT_AGREEMENT = "client_agreement"


@dataclass(frozen=True)
class ASRCapabilities:
    #: Longest audio one request may carry; the item cap is never above it.
    max_audio_seconds: float
    #: ISO-639-1 codes the engine accepts; empty means it does not say.
    languages: frozenset[str]
    prefix_mode: PrefixMode
    sample_rate: int = SAMPLE_RATE
    #: Calls of `transcribe_batch` that may run at once, from as many threads.
    parallel_calls: int = 1


@dataclass(frozen=True)
class StepRequest:
    """Transcribe `audio` (float32 mono at the engine's rate) so that the text starts with `prefix`."""

    audio: FloatAudio
    prefix: str = ""
    language: str | None = None
    #: With `language` left open: the languages the speech may be in (empty: any); the engine
    #: detects the likeliest of them.
    detect_among: tuple[str, ...] = ()
    prompt: str | None = None
    #: The service whose ASR routes also apply ("interpreter": `interpreter.asr_routes`); "":
    #: only the server's (`asr.routes`).
    scope: str = ""
    #: Also say where each word of the hypothesis starts (`StepResult.words`), for sealing.
    word_times: bool = False
    #: Free-form labels for logs (session id, item id); never sent to a model.
    tags: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class WordStart:
    """Where a word of a hypothesis starts: at `chars` in its text (its leading space), and
    `seconds` into the request's audio."""

    chars: int
    seconds: float


@dataclass(frozen=True)
class StepResult:
    #: The whole hypothesis, the forced prefix included.
    text: str
    #: The language the engine used (detected when the request left it open).
    language: str | None = None
    #: The probability the engine gave that detected language, where it says.
    language_probability: float | None = None
    #: Each word's start, in order, when the request asked (`word_times`) and the engine
    #: can tell; empty otherwise.
    words: tuple[WordStart, ...] = ()
    #: Mean log probability of the generated tokens, and the probability the model gave to
    #: "no speech" in the audio, where the backend reports them (Whisper's verbose_json segments).
    avg_logprob: float | None = None
    no_speech_prob: float | None = None


class ASREngine(abc.ABC):
    """A speech recogniser that serves re-decode steps, many per call."""

    name: str
    capabilities: ASRCapabilities
    tokenizer: TextTokenizer

    @abc.abstractmethod
    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        """Run every request, blocking; called from a worker thread.

        A request the engine refuses (an unsupported language, say) gets a `ClientError`
        in its slot while the others still run; a failure of the whole call raises.
        """

    def batch_key(self, request: StepRequest) -> Hashable:
        """Requests with equal keys may share one `transcribe_batch` call."""
        return None

    def warm_up(self) -> None:
        """One real call before the first session's, so that it does not pay for lazy set-up.

        Two seconds of faint noise: a step's shape, with nothing in it to transcribe.
        """
        rng = np.random.default_rng(0)
        audio = (rng.standard_normal(2 * self.capabilities.sample_rate) * 1e-3).astype(np.float32)
        languages = self.capabilities.languages
        language = "en" if not languages or "en" in languages else min(languages)
        self.transcribe_batch([StepRequest(audio, language=language, tags={"warm_up": "1"})])

    def describe(self) -> EngineInfo:
        """Name, backend, device and compute type, for /health and the start-up log."""
        return EngineInfo(name=self.name, backend=type(self).__name__)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model."""
