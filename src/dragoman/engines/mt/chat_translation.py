"""Translation on another server: an OpenAI-compatible `POST /v1/chat/completions`.

Served by vLLM, llama.cpp's server (`python -m llama_cpp.server`), OpenAI and others, so a
fleet of front-ends can leave MT to inference servers (`mt.base_url`) for MT protocol v1 and
the interpreter.

What a text API cannot give: AlignAtt commits a draft's tokens by where the model's alignment
heads look in the source, and a chat-completions server returns text, never attention. It
cannot be asked to continue a given assistant prefix either. So this backend re-translates:
every draft asks for the translation of the whole source so far, and the accepted target is
kept on this side by aligning the new translation with it word by word
(`engines/asr/word_agreement.agree`, as remote ASR keeps its stable prefix); the draft is the
words after it. The session then commits by LocalAgreement instead of attention
(`streaming/local_agreement.py`): what two consecutive drafts of an utterance agree on. A
draft's tokens are words (`WordTokenizer`), with CJK characters one by one.

Failures: a connect is retried a bounded number of times only; a server that cannot be reached
or does not answer within `timeout_s` is `MTServerUnavailable`, one that answers with an error
`MTServerError`, both server faults logged with an error id by the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations
from pathlib import Path
from typing import Any

import httpx

from dragoman.config import MTSettings
from dragoman.engines.asr.word_agreement import WordTokenizer, agree
from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.remote import safe_url
from dragoman.engines.mt.base import (
    UNSEGMENTED_LANGS,
    DraftMode,
    MTCapabilities,
    MTDraft,
    MTEngine,
    MTRequest,
    final_token_budget,
)
from dragoman.engines.mt.qwen_prompt import language_name
from dragoman.errors import EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)

BACKEND = "chat-translation"
#: Directions served when `mt.directions` names none: every pair of these languages.
DEFAULT_LANGUAGES = ("en", "de", "it", "zh", "fr", "es")


class MTServerUnavailable(EngineFailure):
    """The MT server cannot be reached or did not answer in time."""

    code = "mt_server_unavailable"


class MTServerError(EngineFailure):
    """The MT server answered with an error, or with no translation."""

    code = "mt_server_error"


class ChatTranslation(MTEngine):
    """An MTEngine whose drafts are translations by the chat model at `settings.base_url`."""

    capabilities = MTCapabilities(attention=False, prompt_context=True, kv_reuse=False, frontier_stop=False)

    def __init__(self, settings: MTSettings) -> None:
        if not settings.base_url:
            raise ValueError("the remote MT backend needs mt.base_url")
        self.name = settings.remote_model
        self.where = safe_url(settings.base_url)
        self._directions = sorted(settings.directions) or sorted(
            f"{a}-{b}" for a, b in permutations(DEFAULT_LANGUAGES, 2)
        )
        self.tokenizer = WordTokenizer()
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s, connect=min(5.0, settings.timeout_s)),
            transport=httpx.HTTPTransport(retries=settings.connect_retries),
        )

    def directions(self) -> list[str]:
        return list(self._directions)

    def draft(self, request: MTRequest) -> MTDraft:
        words = list(request.source_words)
        budget = final_token_budget(len(words), 2 * len(words))
        translation = self._complete(messages(request), budget)
        # The accepted target stays as it is; the draft is what the translation adds after it.
        continuation = agree(request.target_prefix, translation).text[len(request.target_prefix) :]
        if not request.target_prefix:
            continuation = continuation.lstrip()
        ids = self.tokenizer.encode(continuation)
        final = request.mode is DraftMode.FINAL
        return MTDraft(ids, None, finished=final, computed_tokens=len(ids), retranslation=True)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(token_ids)

    def warm_up(self) -> None:
        """The base class's drafts, so that a server that is down shows in the log at start-up;
        the server starts anyway: sessions that need no MT are not held up by it."""
        try:
            super().warm_up()
        except EngineFailure as exc:
            log.warning("the remote MT server failed its warm-up", where=self.where, error=exc.message)

    def describe(self) -> EngineInfo:
        return EngineInfo(name=f"{self.name}@{self.where}", backend=BACKEND, device="remote")

    def close(self) -> None:
        self._client.close()

    def _complete(self, chat: list[dict[str, str]], max_tokens: int) -> str:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": chat,
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        try:
            response = self._client.post("chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise MTServerUnavailable(f"the MT server at {self.where} did not answer in time") from exc
        except httpx.TransportError as exc:
            raise MTServerUnavailable(f"the MT server at {self.where} cannot be reached: {exc}") from exc
        if response.status_code >= 400:
            raise MTServerError(
                f"the MT server at {self.where} answered HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise MTServerError(f"the MT server at {self.where} answered with no translation") from exc
        if not isinstance(content, str):
            raise MTServerError(f"the MT server at {self.where} answered with no translation")
        return content.strip()


def messages(request: MTRequest) -> list[dict[str, str]]:
    """The chat of one draft: the instruction, earlier pairs as turns, then the source."""
    source, target = language_name(request.source_lang), language_name(request.target_lang)
    system = (
        f"You translate {source} into {target}. Reply with the {target} translation of the user's "
        "text and nothing else: no notes, no quotes, no source text."
    )
    if request.mode is DraftMode.PARTIAL:
        system += " The text may stop mid-sentence: translate what is there and do not complete it."
    if request.force_target_language:
        system += f" Write only in {target}."
    if request.context_text:
        system += f"\nContext, not to be translated: {request.context_text}"
    chat = [{"role": "system", "content": system}]
    for said, translated in request.history:
        chat += [{"role": "user", "content": said}, {"role": "assistant", "content": translated}]
    joiner = "" if request.source_lang.split("-")[0] in UNSEGMENTED_LANGS else " "
    chat.append({"role": "user", "content": joiner.join(request.source_words)})
    return chat


def create(settings: MTSettings, cache_dir: Path | None = None) -> MTEngine:
    """The registry's factory: nothing is loaded here, the model is the server's."""
    return ChatTranslation(settings)
