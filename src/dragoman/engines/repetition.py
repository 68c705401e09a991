"""The repetition loop of a decoder that does not stop: found in its tokens and cut off.

Shared by the engines that decode greedily. On a short window Whisper sometimes does
not predict the end of the text after the last word and starts over instead: " And so
my fellow Americans. And so my fellow Americans. And so…", " In addition, in addition,
in addition, …", " 1.25.25.25…". The MT model can do the same after a streamed target
prefix ("Die Konzepte der Konzepte der Konzepte der …", FLORES en→de line 65).
The loop shows as a tail of the token sequence that repeats with a short period up to
the length limit. Cutting the sequence after the first copy gives what the decoder
said before it lost the end, which is what Whisper says on a padded window.

A speaker can repeat themselves too ("no, no"), so a tail counts as a loop only with
at least `MIN_COPIES` copies, or two when the decoder ran into its length limit, which
an utterance that ends does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: Copies of a period that make a loop (see the module docstring).
MIN_COPIES = 3
#: The shortest loop, in tokens, over all its copies: "no no no" is speech, not a loop.
MIN_LOOP_TOKENS = 6


def loop_start(
    ids: Sequence[int],
    start: int = 0,
    *,
    at_limit: bool = False,
    clause_end: Callable[[int], bool] = lambda token: False,
) -> int | None:
    """Where to cut `ids` so that a repetition loop in its tail keeps one copy, or None.

    Only `ids[start:]` (what the decoder generated, after a forced prefix) is cut: the
    result is never below `start`. Of the periods that make a loop, the shortest wins.
    The first copy may begin anywhere in the loop's cycle ("In addition, in addition, …"
    repeats " addition, in" from its second token); the cut is after a token that ends
    a clause (`clause_end`, punctuation) when the first copy has one.
    """
    n = len(ids)
    copies = 2 if at_limit else MIN_COPIES
    for period in range(1, (n - start) // 2 + 1):
        # The tail is periodic from `begin` on: ids[k] == ids[k - period] for k >= begin + period.
        j = n - 1
        while j - period >= 0 and ids[j] == ids[j - period]:
            j -= 1
        begin = j + 1 - period
        span = n - begin
        if span < copies * period or span < MIN_LOOP_TOKENS:
            continue
        # A clause end inside the forced prefix would drop what the decoder said after it.
        ends = [c for c in range(max(begin, start) + 1, begin + period + 1) if clause_end(ids[c - 1])]
        cut = max(start, ends[-1] if ends else begin + period)
        if cut < n:
            return cut
    return None


#: Tokens in a row that make an echo (see `echo_start`): longer than a name or a phrase a
#: speaker repeats ("Mr. Birket Foster's" is six), shorter than a copied clause.
ECHO_TOKENS = 8


def echo_start(ids: Sequence[int], start: int, context: Sequence[int], n: int = ECHO_TOKENS) -> int | None:
    """Where the generated part of `ids` (from `start`) begins to copy `n` tokens in a row
    of what came before it: the decoder's previous-text prompt (`context`), the forced
    prefix, or its own earlier text. None when it copies nothing that long.

    With the previous window's text as its prompt, Whisper sometimes runs past the end of
    the audio and carries on with that text, word for word ("… used to flash his teeth.
    And Mr. Birket Foster's pictures are a sort of up guards and…", copied from the
    prompt): the copy is cut, and the next step hears what really follows.
    """
    seq = [*context, *ids]
    first = len(context) + start
    # The n-grams that begin before `pos`, growing as `pos` moves on.
    seen = {tuple(seq[p : p + n]) for p in range(min(first, max(0, len(seq) - n + 1)))}
    for pos in range(first, len(seq) - n + 1):
        gram = tuple(seq[pos : pos + n])
        if gram in seen:
            return pos - len(context)
        seen.add(gram)
    return None


#: A decoder that starts the window over re-reads the forced prefix from one of its first
#: `RESTART_FROM` tokens, for at least `RESTART_TOKENS` tokens.
RESTART_FROM = 3
RESTART_TOKENS = 2


def reread_length(prefix: Sequence[int], ids: Sequence[int], n: int = ECHO_TOKENS) -> int:
    """How many of the generated `ids` (after the forced `prefix`) read the prefix again; 0
    when they do not. Prefixes shorter than `n` tokens are never taken for re-read.

    Given a forced prefix, Moonshine sometimes starts the window over after it: "To the north
    and within easy reach is the romantic and fascinating town of sintra in which" then " the
    north." (the prefix forced on audio that ends before it does: 16 words on 2.4-4.4 s of a
    FLEURS clip), and once a later step has forced that, " the north and within easy reach is
    … sintra in which was made famous to foreigners …" (2 interpreter sessions on 2 cores).
    A copy that runs to the prefix's end (at least `n` tokens) is dropped and what follows it
    kept: that is what really came after the prefix. A copy from the prefix's first tokens
    that stops short of its end is a start over with nothing new: all of `ids` is dropped, and
    the next step, on more audio, says what follows. (`echo_start` would end the text at the
    copy instead, and the next step, forced to the same prefix, would start over again.)
    """
    if len(prefix) < n:
        return 0
    for start in range(len(prefix)):
        tail = prefix[start:]
        same = next((i for i, (a, b) in enumerate(zip(ids, tail, strict=False)) if a != b), None)
        copied = min(len(ids), len(tail)) if same is None else same
        if copied == len(tail) and copied >= n:
            return copied
        if start < RESTART_FROM and copied >= RESTART_TOKENS:
            return len(ids)
    return 0
