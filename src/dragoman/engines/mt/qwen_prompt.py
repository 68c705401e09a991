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
engine reuse the KV cache of everything before it. For the same reason a history
turn is tokenized as the session's cache holds it (`Spellings`).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt.base import word_separator
from dragoman.errors import EngineFailure
from dragoman.languages import primary_subtag

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

#: The private-use character that delimits the markers below; a client's text loses it
#: (`_plain`), so that no context or history can pose as one.
_MARK = "\ue000"
_SOURCE_MARK = f"{_MARK}SOURCE{_MARK}"
#: Where the history's sources and targets go in the rendered template, so that each is
#: tokenized on its own (`Spellings`). The cuts fall at special tokens or before the space
#: that opens a source, where the tokenizer splits anyway: a turn tokenized from its text gets
#: the ids of the whole text tokenized at once (a Chinese source is cut off its colon, as the
#: utterance's own source is).
_TURN_MARKS = re.compile(f"{_MARK}TURN[0-9]+{_MARK}")


def _turn_mark(index: int) -> str:
    return f"{_MARK}TURN{index}{_MARK}"


def _plain(text: str) -> str:
    return text.replace(_MARK, "").strip()


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(primary_subtag(code), code)


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
        #: Token ids of the recent template texts between history turns, by text.
        self._literal_ids: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _frame(
        self,
        source_lang: str,
        target_lang: str,
        context_text: str | None,
        history: Sequence[tuple[str, str]],
        spelled: Mapping[str, Sequence[int]],
    ) -> tuple[list[int], str]:
        """The token ids before the source and the chat-template text after it.

        The history's sources and targets are tokenized on their own, each as `spelled` has
        it where it has it (`Spellings`), the template's text around them as it is (memoised).
        """
        src, tgt = language_name(source_lang), language_name(target_lang)
        sep = word_separator(source_lang)
        system = "You are a professional translator."
        context = _plain(context_text or "")
        if context:
            # "context_text ... injected into the MT prompt outside the source-marked region
            # (it is never translated)" (MT protocol v1).
            system += (
                "\n\nBackground for the conversation (for reference only; never translate it):\n" + context
            )

        def ask(text: str) -> str:
            return f"Translate the following {src} text into {tgt}. Output only the {tgt} translation.\n\n{src}:{text}"

        messages = [{"role": "system", "content": system}]
        turns: list[str] = []
        for source, target in history:
            messages.append({"role": "user", "content": ask(_turn_mark(len(turns)))})
            turns.append(sep + _plain(source))
            messages.append({"role": "assistant", "content": _turn_mark(len(turns))})
            turns.append(_plain(target))
        messages.append({"role": "user", "content": ask(_SOURCE_MARK)})
        text: str = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        head, mark, tail = text.partition(_SOURCE_MARK)
        literals = _TURN_MARKS.split(head)
        if not mark or _SOURCE_MARK in tail or len(literals) != len(turns) + 1:
            raise EngineFailure("the chat template mangled the source marker")
        ids = self._literal(literals[0])
        for turn, literal in zip(turns, literals[1:], strict=True):
            known = spelled.get(turn)
            ids += list(known) if known is not None else self.encode(turn)
            ids += self._literal(literal)
        return ids, tail

    def _literal(self, text: str) -> list[int]:
        ids = self._literal_ids.get(text)
        if ids is None:
            if len(self._literal_ids) >= self._memo_size:
                self._literal_ids.clear()
            ids = self._literal_ids[text] = self.encode(text)
        return list(ids)

    def build(
        self,
        source_lang: str,
        target_lang: str,
        source_words: Sequence[str],
        target_prefix: str = "",
        context_text: str | None = None,
        history: Sequence[tuple[str, str]] = (),
        force_target_language: bool = False,
        spelled: Mapping[str, Sequence[int]] | None = None,
    ) -> Prompt:
        head_ids, tail = self._frame(source_lang, target_lang, context_text, history, spelled or {})
        sep = word_separator(source_lang)
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
            cue = TARGET_CUES.get(primary_subtag(target_lang), f"{language_name(target_lang)}:")
            # On a line of its own, so the translation starts as it would without the label.
            ids.extend(self.encode(cue + "\n"))
        target_start = len(ids)
        if target_prefix:
            ids.extend(self.encode(target_prefix))
        return Prompt(ids, spans, source_start, source_end, target_start)


class Spellings:
    """How each session's last final prompts spelled their source and target in tokens.

    A final's source and translation come back as a history turn of the session's next
    prompts. Tokenized again from their text, they may differ from the tokens the KV cache
    holds: the drafted target may split a word otherwise than the tokenizer (an 8-line
    FLORES session recomputed 89 tokens of its fourth utterance where ~30 were new), and a
    Chinese source was fed a character at a time. Each key's recent turns are kept by text,
    so the next prompts (`PromptBuilder.build(spelled=...)`) spell them as the cache has them.
    """

    #: Turns a key keeps (a source and a target per utterance): more than a history window holds.
    TURNS_PER_KEY = 64

    def __init__(self, max_keys: int) -> None:
        self._max_keys = max(1, max_keys)
        self._by_key: OrderedDict[str, dict[str, tuple[int, ...]]] = OrderedDict()

    def of(self, key: str | None) -> Mapping[str, Sequence[int]]:
        """The key's spellings (a snapshot: `record` replaces it, never changes it)."""
        return self._by_key.get(key, {}) if key is not None else {}

    def record(
        self,
        key: str | None,
        source_lang: str,
        source_words: Sequence[str],
        prompt: Prompt,
        drafted: Sequence[int],
        decode: Callable[[Sequence[int]], str],
    ) -> None:
        """Keep the source and target of a final draft of `prompt` (drafted: its new tokens)."""
        if key is None:
            return
        sep = word_separator(source_lang)
        source = sep + sep.join(w.strip() for w in source_words if w.strip())
        target_ids = tuple(prompt.ids[prompt.target_start :]) + tuple(drafted)
        target = decode(target_ids)
        turns = dict(self._by_key.get(key, {}))
        turns[source] = tuple(prompt.ids[prompt.source_start : prompt.source_end])
        if target and target == target.strip() and "\ufffd" not in target:
            turns[target] = target_ids  # the history holds the text stripped: only an exact one
        while len(turns) > self.TURNS_PER_KEY:
            del turns[next(iter(turns))]
        self._by_key[key] = turns
        self._by_key.move_to_end(key)
        while len(self._by_key) > self._max_keys:
            self._by_key.popitem(last=False)

    def drop(self, key: str) -> None:
        self._by_key.pop(key, None)

    def clear(self) -> None:
        self._by_key.clear()
