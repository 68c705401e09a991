"""One request of a Whisper batch decode, and what is made of its hypothesis.

`DecodeItem` carries a request through `WhisperCT2Engine.transcribe_batch`
(`engines.asr.whisper_ct2`, whose docstring tells why trimmed windows need guards).
Two of those guards are here: `length_budget`, the decoder length a request's audio
can need, so a loop stops after a few dozen tokens; and `take_hypothesis`, which strips
the forced prefix, cuts a repetition loop or an echo of earlier text (`repetition`), and
marks a decode that still looks like a loop as suspect, to be decoded again over the
full 30 s window. `word_starts` places the hypothesis's words in its audio.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dragoman.audio.rates import SAMPLE_RATE
from dragoman.engines.asr.base import StepRequest, WordStart
from dragoman.engines.asr.whisper_encoder import GRAIN
from dragoman.engines.asr.whisper_tokenizer import WhisperTokenizer
from dragoman.engines.repetition import echo_start, loop_start

#: More tokens than any speech yields per second (fast speech is ~5 tokens/s in English,
#: more in languages that BPE splits finely): the length a hypothesis may reach, so a
#: decoder caught in a loop stops after a few dozen tokens instead of hundreds.
_MAX_TOKENS_PER_SECOND = 15
_SLACK_TOKENS = 16
#: openai-whisper's compression_ratio_threshold: above it the text is a repetition loop.
_COMPRESSION_LIMIT = 2.4


@dataclass
class DecodeItem:
    """One request on its way through a `transcribe_batch` call: its prompt, then its decode."""

    slot: int
    request: StepRequest
    prev: list[int]
    prefix_ids: list[int]
    language: str | None
    #: Whisper's probability of `language`, when it was detected here.
    language_probability: float | None = None
    window: int = 0
    text: str = ""
    #: The hypothesis's tokens, the forced prefix's included.
    ids: list[int] = field(default_factory=list)
    words: tuple[WordStart, ...] = ()
    #: Repetition loops and echoes of earlier text cut off its hypothesis.
    loops: int = 0
    suspect: bool = field(default=False)
    avg_logprob: float | None = None
    no_speech_prob: float | None = None


def _compression_ratio(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def length_budget(item: DecodeItem, prompt_length: int) -> int:
    """The decoder length `item` may need: its prompt plus what its audio can hold."""
    seconds = item.request.audio.shape[0] / SAMPLE_RATE
    hypothesis = int(_MAX_TOKENS_PER_SECOND * seconds) + _SLACK_TOKENS
    return prompt_length + max(_SLACK_TOKENS, hypothesis - len(item.prefix_ids))


def take_hypothesis(
    it: DecodeItem,
    out: Any,
    prompt_length: int,
    limit: int,
    window: int,
    clause_end: Callable[[int], bool],
    decode: Callable[[Sequence[int]], str],
) -> None:
    """Fill `it` in from `out`, its CTranslate2 result for a prompt of `prompt_length` tokens
    decoded with `max_length=limit` over `window` samples."""
    ids = list(out.sequences_ids[0])
    # CTranslate2 returns the forced prefix's tokens with the hypothesis; strip
    # them and keep the caller's own prefix text so the result starts with it exactly.
    n = len(it.prefix_ids)
    new = ids[n:] if ids[:n] == it.prefix_ids else ids
    at_limit = prompt_length + len(new) >= limit
    cut = loop_start([*it.prefix_ids, *new], n, at_limit=at_limit, clause_end=clause_end)
    if cut is not None:
        new = new[: cut - n]
        it.loops += 1
    echo = echo_start([*it.prefix_ids, *new], n, it.prev[1:])
    if echo is not None:
        new = new[: echo - n]
        it.loops += 1
    it.ids = [*it.prefix_ids, *new]
    it.text = it.request.prefix + decode(new)
    it.window = window
    # CTranslate2's score is the hypothesis' log probability over its length.
    it.avg_logprob = float(out.scores[0]) if out.scores else None
    it.no_speech_prob = float(out.no_speech_prob)
    cut_off = cut is not None or echo is not None
    it.suspect = (at_limit and not cut_off) or _compression_ratio(it.text) > _COMPRESSION_LIMIT


def word_starts(
    it: DecodeItem,
    alignments: Sequence[tuple[int, int]],
    tok: WhisperTokenizer,
    text: Callable[[Sequence[int]], str],
) -> tuple[WordStart, ...]:
    """Each word's start: the first encoder frame its first token aligns to. `text` writes
    tokens of `it`'s hypothesis as the engine writes its language."""
    first: dict[int, int] = {}
    for text_index, time_index in alignments:
        first.setdefault(int(text_index), int(time_index))
    words = []
    for i in range(len(it.ids)):
        token = tok.id_to_token(it.ids[i]) or ""
        if (i and not token.startswith("Ġ")) or i not in first:
            continue
        head = text(it.ids[:i])
        if it.text.startswith(head):
            words.append(WordStart(chars=len(head), seconds=first[i] * GRAIN / SAMPLE_RATE))
    return tuple(words)
