"""LocalAgreement: the commit policy of an MT engine that gives no attention.

AlignAtt (`alignatt.py`) commits a draft's tokens by where the model looks in the source; a
remote chat-completions server returns text only (`engines/mt/chat_translation.py`). Its
drafts re-translate the whole source so far, and the policy of Macháček et al.'s
whisper_streaming applies instead: a word is committed once two consecutive drafts of the
utterance agree on it, from the accepted target on. Compared as `normalized` words, taken as
the newer draft spells them.
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.engines.asr.word_agreement import normalized


def agreed_words(previous: Sequence[str], current: Sequence[str]) -> int:
    """How many leading words of `current` the `previous` draft also began with."""
    count = 0
    for before, now in zip(previous, current, strict=False):
        if _key(before) != _key(now):
            break
        count += 1
    return count


def _key(word: str) -> str:
    """A word as compared; one of punctuation alone as it is."""
    return normalized(word) or word.strip()
