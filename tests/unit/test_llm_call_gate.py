"""The call gate: which tokens start a call, and the turn's decision from their share of a logits row."""

from __future__ import annotations

import numpy as np
import pytest

from dragoman.engines.llm.base import ChatMessage, ToolCall
from dragoman.engines.llm.call_gate import CALL_MASS, LATER_CALL_MASS, CallGate, call_threshold, starts_call


@pytest.mark.parametrize(
    "piece", ["<tool_call>", "<", "<tool", " {", '{"', "{{", "{\n", "```", " ```\n", "``", "`"]
)
def test_what_can_begin_a_call_starts_one(piece: str) -> None:
    assert starts_call(piece)


@pytest.mark.parametrize("piece", ["The", " Paris", "<div", "<|im_end|>", "", " ", "\n", "}", "json"])
def test_text_does_not(piece: str) -> None:
    assert not starts_call(piece)


VOCAB = [b"The", b" sun", b"<tool_call>", b"```", b'{"', b"Hello", b"\xe2\x80"]


def gate() -> CallGate:
    return CallGate(len(VOCAB), VOCAB.__getitem__)


def test_the_call_starters_of_a_vocabulary_are_found() -> None:
    assert gate().tokens == (2, 3, 4)


def test_the_mass_is_the_call_starters_share_of_the_softmax() -> None:
    logits = np.log(np.array([0.3, 0.1, 0.2, 0.15, 0.15, 0.05, 0.05], dtype=np.float32))
    assert gate().mass(logits) == pytest.approx(0.5, abs=1e-6)


def test_a_call_split_over_starters_outweighs_a_likelier_text_token() -> None:
    # The single likeliest token is text (0.35), yet the call starters hold 0.6 between them.
    logits = np.log(np.array([0.35, 0.03, 0.2, 0.2, 0.2, 0.01, 0.01], dtype=np.float32))
    assert int(np.argmax(logits)) == 0
    assert gate().mass(logits) >= CALL_MASS


def test_large_logits_do_not_overflow() -> None:
    logits = np.array([900.0, 0.0, 1000.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)
    assert gate().mass(logits) == pytest.approx(1.0)


def test_a_vocabulary_with_no_starters_never_calls() -> None:
    empty = CallGate(2, [b"a", b"b"].__getitem__)
    assert empty.tokens == () and empty.mass(np.zeros(2, dtype=np.float32)) == 0.0


SYSTEM = ChatMessage("system", "You are a helpful voice AI assistant.")


def test_a_first_turn_needs_the_majority() -> None:
    assert call_threshold((SYSTEM, ChatMessage("user", "Hi"))) == CALL_MASS


def test_after_an_answer_in_words_far_less_is_needed() -> None:
    said = (
        SYSTEM,
        ChatMessage("user", "Hi"),
        ChatMessage("assistant", "Hello!"),
        ChatMessage("user", "Weather?"),
    )
    assert call_threshold(said) == LATER_CALL_MASS < CALL_MASS


def test_a_call_alone_is_no_answer_in_words() -> None:
    call = ToolCall("call_1", "get_weather", '{"city":"Oslo"}')
    called = (SYSTEM, ChatMessage("user", "Weather?"), ChatMessage("assistant", "", tool_calls=(call,)))
    assert call_threshold((*called, ChatMessage("user", "And in Rome?"))) == CALL_MASS


def test_a_tool_output_is_answered_not_called_again() -> None:
    call = ToolCall("call_1", "get_weather", '{"city":"Oslo"}')
    turns = (
        SYSTEM,
        ChatMessage("user", "Hi"),
        ChatMessage("assistant", "Hello!"),
        ChatMessage("user", "Weather in Oslo?"),
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", '{"sky": "grey"}', tool_call_id="call_1"),
    )
    assert call_threshold(turns) == CALL_MASS
