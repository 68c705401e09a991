"""Speech recognition on another server: OpenAI's `POST /v1/audio/transcriptions`.

Served by vLLM for Whisper, by speaches, by OpenAI itself and by dragoman
(`transports/audio_transcriptions.py`), so a fleet of front-ends can leave recognition to
inference servers (`asr.base_url`). The streaming policy is unchanged: each re-decode step
is one request carrying the step's window as a 16 kHz WAV, with `response_format:
verbose_json` for the language, the scores and (when the step asks) the word timings. The
server cannot be made to start its text with the stable prefix, so the prefix is kept on this
side (`word_agreement.agree`); the text before the window (`StepRequest.prompt`: the sealed
text and the client's prompt) goes as the request's `prompt`. A language to be detected among
candidates (`StepRequest.detect_among`), which the request cannot name, is kept among them by
asking again in each (`OpenAITranscriptions._among`).

Every request is a call of its own (`batch_key`), and calls run at once up to `max_concurrent`
(the worker's lanes): batching is the inference server's business. Failures
(`engines/remote_http.py`): a server that cannot be reached or does not answer within
`timeout_s` is `ASRServerUnavailable`, one that answers with an error `ASRServerError`; a
language the remote model refuses is the client's `invalid_value`.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Hashable, Sequence
from difflib import SequenceMatcher
from typing import Any

import numpy as np

from dragoman.config import ASRSettings
from dragoman.engines.asr.base import (
    ASRCapabilities,
    ASREngine,
    FloatAudio,
    PrefixMode,
    StepRequest,
    StepResult,
    WordStart,
)
from dragoman.engines.asr.chinese_script import write
from dragoman.engines.asr.word_agreement import (
    WordTokenizer,
    agree,
    normalized,
    split_words,
    with_space,
)
from dragoman.engines.info import EngineInfo
from dragoman.engines.remote_http import RemoteServer
from dragoman.errors import ClientError, EngineFailure, InvalidValue
from dragoman.logs import get_logger

log = get_logger(__name__)

BACKEND = "openai-transcriptions"
#: Whisper's window; vLLM's Whisper takes no more in one request, so neither does a step.
MAX_AUDIO_SECONDS = 30.0
#: The most prompt characters sent: more than Whisper's 223 prompt tokens take in any language.
PROMPT_CHARS = 1200


class ASRServerUnavailable(EngineFailure):
    """The ASR server cannot be reached or did not answer in time."""

    code = "asr_server_unavailable"


class ASRServerError(EngineFailure):
    """The ASR server answered with an error, or with something that is not a transcript."""

    code = "asr_server_error"


class OpenAITranscriptions(ASREngine):
    """An ASREngine whose steps are transcribed by the server at `settings.base_url`."""

    def __init__(self, settings: ASRSettings) -> None:
        if not settings.base_url:
            raise ValueError("the remote ASR backend needs asr.base_url")
        self.name = settings.remote_model
        self.capabilities = ASRCapabilities(
            max_audio_seconds=MAX_AUDIO_SECONDS,
            languages=frozenset(),
            prefix_mode=PrefixMode.CLIENT_AGREEMENT,
            parallel_calls=settings.max_concurrent,
        )
        self.tokenizer = WordTokenizer()
        self.server = RemoteServer(
            "ASR",
            settings.base_url,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            connect_retries=settings.connect_retries,
            unavailable=ASRServerUnavailable,
            error=ASRServerError,
            max_connections=settings.max_concurrent,
        )
        self._language_codes = _language_codes()
        #: The script Chinese is written in here, whatever the server writes (`chinese_script`).
        self.chinese_script = settings.chinese_script

    # -- the ASREngine interface ------------------------------------------------------

    def batch_key(self, request: StepRequest) -> Hashable:
        # A key equal to no other: each step is a call of its own, and the worker's lanes
        # (`parallel_calls`) keep up to `max_concurrent` of them in flight.
        return object()

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        return [self.transcribe(request) for request in requests]

    def warm_up(self) -> None:
        self.server.warm_up(super().warm_up)

    def describe(self) -> EngineInfo:
        return self.server.describe(self.name, BACKEND)

    def close(self) -> None:
        self.server.close()

    # -- one step ---------------------------------------------------------------------

    def transcribe(self, request: StepRequest) -> StepResult | ClientError:
        """One step: the window transcribed remotely, then made to start with its prefix."""
        fields: dict[str, Any] = {
            "model": self.name,
            "response_format": "verbose_json",
            "temperature": "0",
        }
        if request.language:
            fields["language"] = request.language
        elif len(request.detect_among) == 1:
            fields["language"] = request.detect_among[0]  # nothing to detect
        if request.prompt:
            fields["prompt"] = prompt_tail(request.prompt)
        if request.word_times:
            fields["timestamp_granularities[]"] = ["segment", "word"]
        files = {"file": ("step.wav", wav_bytes(request.audio), "audio/wav")}
        body = self._post(fields, files)
        if isinstance(body, ClientError):
            return body
        if "language" not in fields and request.detect_among:
            body = self._among(body, request.detect_among, fields, files)
        text = body.get("text")
        if not isinstance(text, str):
            raise self.server.fault("a text")
        language = self._language(body.get("language")) or request.language
        # Spaced as a local Whisper's text is: the window's text follows the sealed text, and
        # its Chinese written as the local Whisper's, so that the prefix agrees with it.
        hypothesis = with_space(write(text, language, self.chinese_script))
        agreement = agree(request.prefix, hypothesis, by_letters=True)
        if agreement.disagreed:
            log.debug(
                "remote hypothesis disagreed with the prefix", words=agreement.disagreed, **request.tags
            )
        segments = [s for s in body.get("segments") or [] if isinstance(s, dict)]
        words: tuple[WordStart, ...] = ()
        if request.word_times:
            said = [
                {**w, "word": write(str(w.get("word", "")), language, self.chinese_script)}
                for w in body.get("words") or []
                if isinstance(w, dict)
            ]
            times = word_times(hypothesis, said)
            timed = [(chars, times[index]) for chars, index in agreement.words]
            words = _ordered(WordStart(chars, at) for chars, at in timed if at is not None)
        return StepResult(
            text=agreement.text,
            language=language,
            words=words,
            avg_logprob=_mean(s.get("avg_logprob") for s in segments),
            no_speech_prob=_mean(s.get("no_speech_prob") for s in segments),
        )

    def _among(
        self, body: dict[str, Any], among: Sequence[str], fields: dict[str, Any], files: dict[str, Any]
    ) -> dict[str, Any]:
        """The answer in the likeliest language of `among`, the speech's possible languages.

        OpenAI's request takes one `language` and verbose_json names one, with no ranking to
        pick the next from (the local engine takes the likeliest of Whisper's ranking that is
        among them: `whisper_ct2.likeliest`). When the server detects another language, the
        step is asked again in each of `among`, and the transcript the model is surest of (the
        segments' mean `avg_logprob`) is taken: Whisper base hears a 2 s English clip as
        Chinese, but scores it -0.68 forced to English against -1.08 to French and -1.71 to
        German. It costs an item's first step once each (later steps keep the language); a
        server that reports no scores keeps its own detection.
        """
        detected = self._language(body.get("language"))
        if detected is None or detected in among or not str(body.get("text", "")).strip():
            return body
        best, best_score = body, None
        for language in among:
            answer = self._post({**fields, "language": language}, files)
            score = None if isinstance(answer, ClientError) else _score(answer)
            if isinstance(answer, dict) and score is not None and (best_score is None or score > best_score):
                best, best_score = answer, score
        log.debug(
            "remote language detected outside the candidates", detected=detected, chosen=best.get("language")
        )
        return best

    def _post(self, fields: dict[str, Any], files: dict[str, Any]) -> dict[str, Any] | ClientError:
        response = self.server.post("audio/transcriptions", data=fields, files=files)
        if response.status_code == 400 and "language" in fields and "language" in response.text:
            # The one refusal that is the client's: a language the remote model does not know.
            return InvalidValue(f"language {fields['language']!r} is not supported", param="language")
        body = self.server.json_of(response)
        if not isinstance(body, dict):
            raise self.server.fault("a JSON object")
        return body

    def _language(self, reported: object) -> str | None:
        """verbose_json's language (Whisper's name, "english", or a code) as an ISO-639-1 code."""
        if not isinstance(reported, str) or not reported:
            return None
        name = reported.strip().lower()
        return self._language_codes.get(name, name if len(name) <= 3 else None)


def prompt_tail(prompt: str) -> str:
    """The end of `prompt` that Whisper reads (its last 223 tokens, under `PROMPT_CHARS`), cut at
    a space: a long client prompt must not make the server refuse the step (OpenAI's and
    dragoman's limit is 4096 characters)."""
    if len(prompt) <= PROMPT_CHARS:
        return prompt
    tail = prompt[-PROMPT_CHARS:]
    return tail.split(" ", 1)[-1] if " " in tail else tail


def wav_bytes(audio: FloatAudio, rate: int = 16_000) -> bytes:
    """`audio` (float32 mono in [-1, 1]) as a 16-bit PCM WAV file."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm.tobytes())
    return out.getvalue()


def word_times(hypothesis: str, words: Sequence[object]) -> list[float | None]:
    """The start of each word of `hypothesis` (`split_words`), from verbose_json's `words`.

    The server's words need not be cut as ours are (punctuation, contractions): they are
    aligned on their normalised forms, and a word that finds no match has no time.
    """
    ours = split_words(hypothesis)
    theirs = [w for w in words if isinstance(w, dict) and isinstance(w.get("start"), int | float)]
    times: list[float | None] = [None] * len(ours)
    matcher = SequenceMatcher(
        None,
        [normalized(w) for w in ours],
        [normalized(str(w.get("word", ""))) for w in theirs],
        autojunk=False,
    )
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            times[block.a + k] = float(theirs[block.b + k]["start"])
    return times


def _ordered(words: Any) -> tuple[WordStart, ...]:
    """Word starts rising in both text and time (an alignment slip would break the order)."""
    out: list[WordStart] = []
    for word in words:
        if not out or (word.chars > out[-1].chars and word.seconds >= out[-1].seconds):
            out.append(word)
    return tuple(out)


def _score(body: dict[str, Any]) -> float | None:
    """How sure the model is of an answer's transcript: its segments' mean avg_logprob."""
    return _mean(s.get("avg_logprob") for s in body.get("segments") or [] if isinstance(s, dict))


def _mean(values: Any) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    return sum(numbers) / len(numbers) if numbers else None


def _language_codes() -> dict[str, str]:
    """Whisper's language names -> ISO-639-1 codes ("english" -> "en")."""
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    names: dict[str, str] = LANGUAGES
    return {name: code for code, name in names.items()}


def create(settings: ASRSettings, cache_dir: object = None) -> ASREngine:
    """The registry's factory: nothing is loaded here, the model is the server's."""
    return OpenAITranscriptions(settings)
