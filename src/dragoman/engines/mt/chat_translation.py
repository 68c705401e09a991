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

Failures (`engines/remote_http.py`): a server that cannot be reached or does not answer within
`timeout_s` is `MTServerUnavailable`, one that answers with an error `MTServerError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations
from pathlib import Path

from dragoman.config import MTSettings
from dragoman.engines.asr.word_agreement import WordTokenizer, agree
from dragoman.engines.info import EngineInfo
from dragoman.engines.mt.base import (
    DraftMode,
    MTCapabilities,
    MTDraft,
    MTEngine,
    MTRequest,
    final_token_budget,
    nothing_drafted,
    word_separator,
)
from dragoman.engines.mt.qwen_prompt import language_name
from dragoman.engines.remote_http import RemoteServer
from dragoman.errors import EngineFailure

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
        self._directions = sorted(settings.directions) or sorted(
            f"{a}-{b}" for a, b in permutations(DEFAULT_LANGUAGES, 2)
        )
        self.tokenizer = WordTokenizer()
        self.server = RemoteServer(
            "MT",
            settings.base_url,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            connect_retries=settings.connect_retries,
            unavailable=MTServerUnavailable,
            error=MTServerError,
        )

    def directions(self) -> list[str]:
        return list(self._directions)

    def draft(self, request: MTRequest) -> MTDraft:
        if request.mode is DraftMode.PREFILL:
            return nothing_drafted()  # the server's prompt cache is its own
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
        self.server.warm_up(super().warm_up)

    def describe(self) -> EngineInfo:
        return self.server.describe(self.name, BACKEND)

    def close(self) -> None:
        self.server.close()

    def _complete(self, chat: list[dict[str, str]], max_tokens: int) -> str:
        body = {"model": self.name, "messages": chat, "temperature": 0, "max_tokens": max_tokens}
        answer = self.server.json_of(self.server.post("chat/completions", json=body))
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise self.server.fault("a translation") from exc
        if not isinstance(content, str):
            raise self.server.fault("a translation")
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
    chat.append({"role": "user", "content": word_separator(request.source_lang).join(request.source_words)})
    return chat


def create(settings: MTSettings, cache_dir: Path | None = None) -> MTEngine:
    """The registry's factory: nothing is loaded here, the model is the server's."""
    return ChatTranslation(settings)
