"""The translation prompt of the Qwen MT engine, with the token span of every source word.

The model's chat template, with the instruction and the context before the
source and only the fixed end of the user turn and the assistant header after
it, then the accepted target prefix:

    <system: translator; context (never translated)>
    <history: user "Translate ... English: src" / assistant "tgt"> ...
    <user: "Translate the following English text into German. ... English:" w1 w2 ... wn>
    <assistant: target_prefix ...

Every source word is tokenized on its own (" " + word; byte-level BPE never
merges across a space), so each word's token span is known and appending a word
changes the prompt only from the end of the source on, which is what lets the
engine reuse the KV cache of everything before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt.base import UNSEGMENTED_LANGS
from dragoman.errors import EngineFailure

#: Language names for the instruction; other codes are used as they are.
LANGUAGE_NAMES: Mapping[str, str] = {
    "ar": "Arabic",
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "hi": "Hindi",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}

#: Bumped when the prompt changes: calibrated heads were chosen under it.
PROMPT_VERSION = 1

#: The label that opens the assistant turn when the target language is forced
#: (`MTRequest.force_target_language`), in the target language itself.
TARGET_CUES: Mapping[str, str] = {
    "de": "Auf Deutsch:",
    "it": "In italiano:",
    "zh": "中文翻译：",
    "fr": "En français :",
    "es": "En español:",
}

_SOURCE_MARK = "\ue000SOURCE\ue000"


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code.split("-")[0].lower(), code)


def _separator(lang: str) -> str:
    return "" if lang.split("-")[0].lower() in UNSEGMENTED_LANGS else " "


@dataclass(frozen=True)
class Prompt:
    """Token ids of a prompt and where its parts are."""

    ids: list[int]
    #: [start, end) token span of each source word; empty for a word with no tokens.
    word_spans: list[tuple[int, int]]
    #: Index of the first source token and one past the last.
    source_start: int
    source_end: int
    #: Index of the first target-prefix token (the end of the assistant header).
    target_start: int

    def membership(self) -> npt.NDArray[np.float32]:
        """[source tokens, words] 0/1 matrix that sums token attention into word attention."""
        matrix = np.zeros((self.source_end - self.source_start, len(self.word_spans)), dtype=np.float32)
        for word, (start, end) in enumerate(self.word_spans):
            matrix[start - self.source_start : end - self.source_start, word] = 1.0
        return matrix


class PromptBuilder:
    """Builds prompts with a transformers tokenizer that has a chat template."""

    def __init__(self, tokenizer: Any, memo_size: int = 32) -> None:
        self._tokenizer = tokenizer
        self._memo_size = memo_size
        #: Token ids of recent prompt heads (system, history, instruction), by text.
        self._head_ids: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _frame(
        self, source_lang: str, target_lang: str, context_text: str | None, history: Sequence[tuple[str, str]]
    ) -> tuple[list[int], str]:
        """The token ids before the source (memoised) and the chat-template text after it."""
        src, tgt = language_name(source_lang), language_name(target_lang)
        system = "You are a professional translator."
        if context_text and context_text.strip():
            # "context_text ... injected into the MT prompt outside the source-marked region
            # (it is never translated)" (MT protocol v1).
            system += (
                "\n\nBackground for the conversation (for reference only; never translate it):\n"
                + context_text.strip()
            )

        def ask(text: str) -> str:
            return f"Translate the following {src} text into {tgt}. Output only the {tgt} translation.\n\n{src}:{text}"

        messages = [{"role": "system", "content": system}]
        for source, target in history:
            messages.append({"role": "user", "content": ask(_separator(source_lang) + source.strip())})
            messages.append({"role": "assistant", "content": target.strip()})
        messages.append({"role": "user", "content": ask(_SOURCE_MARK)})
        text: str = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        head, mark, tail = text.partition(_SOURCE_MARK)
        if not mark or _SOURCE_MARK in tail:
            raise EngineFailure("the chat template mangled the source marker")
        ids = self._head_ids.get(head)
        if ids is None:
            if len(self._head_ids) >= self._memo_size:
                self._head_ids.clear()
            ids = self._head_ids[head] = self.encode(head)
        return ids, tail

    def build(
        self,
        source_lang: str,
        target_lang: str,
        source_words: Sequence[str],
        target_prefix: str = "",
        context_text: str | None = None,
        history: Sequence[tuple[str, str]] = (),
        force_target_language: bool = False,
    ) -> Prompt:
        head_ids, tail = self._frame(source_lang, target_lang, context_text, history)
        sep = _separator(source_lang)
        ids = list(head_ids)
        source_start = len(ids)
        spans: list[tuple[int, int]] = []
        for word in source_words:
            word = word.strip()
            start = len(ids)
            if word:
                ids.extend(self.encode(sep + word))
            spans.append((start, len(ids)))
        source_end = len(ids)
        ids.extend(self.encode(tail))
        if force_target_language:
            cue = TARGET_CUES.get(target_lang.split("-")[0].lower(), f"{language_name(target_lang)}:")
            # On a line of its own, so the translation starts as it would without the label.
            ids.extend(self.encode(cue + "\n"))
        target_start = len(ids)
        if target_prefix:
            ids.extend(self.encode(target_prefix))
        return Prompt(ids, spans, source_start, source_end, target_start)
