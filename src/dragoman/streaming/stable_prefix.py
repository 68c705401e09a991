"""The stable prefix of the re-decode algorithm (the Qwen3-ASR SDK's streaming rollback).

Every step re-transcribes the whole item with the previous raw hypothesis, minus
its last `unfixed_tokens` tokens, forced as the decoder prefix: the head is fixed
while the tail can still be revised. The stable prefix is "raw_text minus its last
unfixed_tokens tokens, backed off further when the cut lands inside a multi-byte
character."
"""

from __future__ import annotations

from dragoman.engines.asr.base import TextTokenizer


def stable_prefix(raw_text: str, tokenizer: TextTokenizer, unfixed_tokens: int) -> str:
    """`raw_text` minus its last `unfixed_tokens` tokens, cut on a whole character.

    Byte-level BPE tokens can split a multi-byte character (CJK, emoji); decoding
    such a cut yields U+FFFD, which the model would then be forced to continue.
    The cut backs off one token at a time until the decoded head is clean.
    """
    if not raw_text:
        return ""
    ids = tokenizer.encode(raw_text)
    end = len(ids) - unfixed_tokens
    while end > 0:
        # Trailing whitespace would force a token (a lone "Ġ") the model never
        # produces before a word; the next step says the space with the word.
        head = tokenizer.decode(ids[:end]).rstrip()
        # A cut inside a character decodes to U+FFFD, which is not a prefix of the
        # text; the same test also rejects a tokenizer that normalises on decode,
        # which would otherwise force text the model never said.
        if head and raw_text.startswith(head):
            return head
        end -= 1
    return ""


def agreed_prefix(earlier: str, later: str) -> str:
    """The whole words two consecutive hypotheses of the same audio start with alike
    (LocalAgreement-2, as in whisper_streaming): their longest common prefix, cut back to where
    a word ends in both, trailing spaces dropped.

    A word ends where whitespace follows it in both. The end of `earlier` counts only after
    punctuation: a decode cut off mid-word ("The cab") must not agree with a longer one on the
    stem. The match is exact: letting case or punctuation differ ("However." for "However,")
    forced commas that sent Moonshine into a comma-laden reading of a FLEURS clip (source WER
    15.5 -> 20.4 % over five clips). Text without spaces (Chinese) agrees on nothing here.
    """
    common = 0
    for a, b in zip(earlier, later, strict=False):
        if a != b:
            break
        common += 1
    end = 0
    for index in range(1, common + 1):
        after_earlier, after_later = earlier[index : index + 1], later[index : index + 1]
        ends_earlier = after_earlier.isspace() or (not after_earlier and not earlier[-1].isalnum())
        if ends_earlier and (after_later.isspace() or not after_later):
            end = index
    return later[:end].rstrip()
