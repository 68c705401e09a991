"""Call or speak: decided once per turn from the model's first-token distribution.

With `tool_choice: "auto"` the model decides whether a turn is a tool call or a
spoken answer, and a small model's single likeliest first token is a poor judge
of that: the mass on the tokens that start a call is split between several of
them (a fence, `{"`, `{{`, `<tool_call>`), so a call the model rates at 0.6
overall may lose to a text token at 0.35, and the other way round. The gate sums
the probability of every token that can start a call (`starts_call`) at the
reply's first position, one read of the logits the prefill leaves, and the turn
is a call when that sum is the majority (`CALL_MASS`). Otherwise those tokens
are banned for the reply, so the turn is spoken text from its first word.

Calibration (Qwen2.5-Coder GGUFs; 12 tool requests and 16 other messages, questions,
greetings and statements, none of them in the tests, under the server's default
instructions, "You are a helpful voice AI assistant." and the Agents SDK example's
"You are a helpful voice assistant. Answer in one or two short sentences.", with
`AgentSettings.tool_preamble`): at 0.5 the 1.5B chose right 27, 28 and 24 of 28 on
zen4 and AVX2 kernels alike (its single likeliest token: 27, 26, 24), the 0.5B 24,
24 and 21 (24, 22, 21). Lower thresholds traded the client's instructions for the
SDK's; temperatures other than 1 did no better. What the gate cannot mend is the
wording: under the client's instructions with the previous preamble every plain
question put most of the mass on a call (0.58 to 0.98 for the 1.5B).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dragoman.engines.llm.markup import FENCE, OPEN_TAG

#: The share of the first token's probability on call starters from which a turn is a call.
CALL_MASS = 0.5
#: What `MarkupFilter` takes for the start of a call: the tag, a fence, a bare JSON object.
_CALL_OPENERS = (OPEN_TAG, FENCE, "{")


def starts_call(piece: str) -> bool:
    """Whether a token whose text is `piece` can begin a tool call at the start of a reply:
    it begins with an opener (leading whitespace aside) or is the beginning of one (`<`, `` ` ``)."""
    text = piece.lstrip()
    return bool(text) and any(opener.startswith(text) or text.startswith(opener) for opener in _CALL_OPENERS)


class CallGate:
    """The call starters of one vocabulary, and the turn's decision from a logits row."""

    def __init__(self, n_vocab: int, piece: Callable[[int], bytes]) -> None:
        self.tokens = tuple(
            token for token in range(n_vocab) if starts_call(piece(token).decode("utf-8", errors="replace"))
        )
        self._index = np.array(self.tokens, dtype=np.int64)

    def mass(self, logits: npt.NDArray[np.float32]) -> float:
        """The probability that the next token starts a call (softmax at temperature 1)."""
        if not self.tokens:
            return 0.0
        shifted = logits.astype(np.float64) - float(np.max(logits))
        weights = np.exp(shifted)
        return float(weights[self._index].sum() / weights.sum())
