"""Call or speak: decided once per turn from the model's first-token distribution.

With `tool_choice: "auto"` the model decides whether a turn is a tool call or a
spoken answer, and a small model's single likeliest first token is a poor judge
of that: the mass on the tokens that start a call is split between several of
them (a fence, `{"`, `{{`, `<tool_call>`), so a call the model rates at 0.6
overall may lose to a text token at 0.35, and the other way round. The gate sums
the probability of every token that can start a call (`starts_call`) at the
reply's first position, one read of the logits the prefill leaves, and the turn
is a call when that sum is the majority (`CALL_MASS`; far less once the model
has answered in words, `call_threshold`). Otherwise those tokens are banned for
the reply, so the turn is spoken text from its first word.

Calibration of the first turn (Qwen2.5-Coder GGUFs; 12 tool requests and 16 other messages, questions,
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

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from dragoman.engines.llm.base import ChatMessage
from dragoman.engines.llm.markup import FENCE, OPEN_TAG

#: The share of the first token's probability on call starters from which a turn is a call.
CALL_MASS = 0.5
#: The same once the model has answered in words in this conversation: its earlier answers pull
#: its first token towards words, for requests a tool serves too. After two or four turns of
#: plain questions and answers, the 1.5B put 0.002 to 0.36 (median 0.13) on a call for 36 weather
#: requests, and under 0.0005 for 36 plain questions; at 0.02 it calls for 28 of the 36 (the 0.5B
#: for 1: it put under 0.02 on nearly all of them, as it does on plain questions).
LATER_CALL_MASS = 0.02
#: What `MarkupFilter` takes for the start of a call: the tag, a fence, a bare JSON object.
_CALL_OPENERS = (OPEN_TAG, FENCE, "{")


def starts_call(piece: str) -> bool:
    """Whether a token whose text is `piece` can begin a tool call at the start of a reply:
    it begins with an opener (leading whitespace aside) or is the beginning of one (`<`, `` ` ``)."""
    text = piece.lstrip()
    return bool(text) and any(opener.startswith(text) or text.startswith(opener) for opener in _CALL_OPENERS)


def call_threshold(messages: Sequence[ChatMessage]) -> float:
    """The call mass a turn needs after `messages`: lower once the model has answered in words,
    except right after a tool's output, which the model is to answer, not call again."""
    if messages and messages[-1].role == "tool":
        return CALL_MASS
    if any(m.role == "assistant" and m.content.strip() for m in messages):
        return LATER_CALL_MASS
    return CALL_MASS


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
