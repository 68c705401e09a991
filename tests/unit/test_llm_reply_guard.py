"""A spoken reply kept whole and short (engines.llm.reply_guard), alone and inside a llama.cpp turn.

The turn runs on a scripted stand-in for `LlamaRuntime` whose "model" says a fixed
reply one word a token, so the test sees exactly what reaches TTS, how the turn ends
and what the sequence keeps for the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from dragoman.engines.llm.base import LLMPiece, TextPiece
from dragoman.engines.llm.llama_runtime import LlamaRuntime
from dragoman.engines.llm.llama_turn import Turn, TurnPlan
from dragoman.engines.llm.reply_guard import ANSWER_GRACE, ReplyGuard
from dragoman.engines.workers import CancelToken

EOG = 0


class Vocabulary:
    """Words as tokens: " word" pieces, so "Paris." is [" Paris", "."]."""

    def __init__(self) -> None:
        self.pieces: list[str] = ["<eog>"]

    def token(self, piece: str) -> int:
        if piece not in self.pieces:
            self.pieces.append(piece)
        return self.pieces.index(piece)

    def encode(self, text: str) -> list[int]:
        out = []
        for word in text.split(" "):
            core = word.rstrip(".,!?")
            if core:
                out.append(self.token(" " + core))
            out += [self.token(ch) for ch in word[len(core) :]]
        return out

    def text(self, tokens: Sequence[int]) -> str:
        return "".join(self.pieces[t] for t in tokens)


class ScriptedRuntime:
    """The calls `Turn` makes of `LlamaRuntime`; its sampler says `reply` then ends the turn."""

    def __init__(self, vocab: Vocabulary, reply: str) -> None:
        self.vocab = vocab
        self.script = [*vocab.encode(reply), EOG]
        self.sequence: list[int] = []

    def truncate(self, length: int) -> None:
        del self.sequence[length:]

    def decode(self, tokens: Sequence[int], start: int, cancel: object = None) -> int:
        assert start == len(self.sequence), "tokens go in at the end of the sequence"
        self.sequence += tokens
        return len(tokens)

    def sampler(self, **_: Any) -> ScriptedRuntime:
        return self

    def sample(self) -> int:
        return self.script.pop(0) if self.script else EOG

    def close(self) -> None:
        pass

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def piece(self, token: int) -> bytes:
        return b"" if token == EOG else self.vocab.pieces[token].encode()

    def tokenize_plain(self, text: str) -> list[int]:
        return self.vocab.encode(text)


def speak(reply: str, *, answer_tokens: int | None = None, max_new_tokens: int = 200) -> tuple[str, str, str]:
    """(what was said, the finish reason, the reply the sequence keeps)."""
    vocab = Vocabulary()
    runtime = ScriptedRuntime(vocab, reply)
    prompt = [vocab.token("<prompt>"), vocab.token("<assistant>")]
    plan = TurnPlan(
        prompt=prompt,
        tools=(),
        offered=(),
        call_first=False,
        single_call=False,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        seed=0,
        answer_tokens=answer_tokens,
    )
    said: list[str] = []

    def emit(piece: LLMPiece) -> None:
        assert isinstance(piece, TextPiece)
        said.append(piece.text)

    outcome = Turn(cast(LlamaRuntime, runtime), plan, [], CancelToken(), emit).run()
    assert outcome.sequence == runtime.sequence
    return "".join(said).strip(), outcome.reason, vocab.text(outcome.sequence[len(prompt) :]).strip()


RAMBLING = (
    "The capital of China is Beijing. Its friends include Shanghai, Guangzhou, Shenzhen, Chengdu, "
    "Wuhan, Xian, Hangzhou, Nanjing, Tianjin, Chongqing, Suzhou, Qingdao, Dalian, Xiamen, Harbin"
)


def test_a_rambling_answer_is_cut_at_a_sentence_end_and_completes() -> None:
    said, reason, kept = speak(RAMBLING, answer_tokens=6, max_new_tokens=100)
    assert (said, reason) == ("The capital of China is Beijing.", "stop")
    assert kept == said  # the next turn's prompt renders what was said


def test_a_sentence_that_never_ends_is_cut_back_to_a_clause_end() -> None:
    # Past the answer's length the list is held back; when the grace runs out it ends at a comma.
    ramble = "Beijing is big. It has " + ", ".join(f"district{i}" for i in range(40))
    said, reason, kept = speak(ramble, answer_tokens=6, max_new_tokens=200)
    assert reason == "stop"
    assert said == kept
    assert said.startswith("Beijing is big. It has district0, district1,")
    assert said.endswith(",")
    assert len(said.split()) <= 6 + ANSWER_GRACE


def test_the_answer_runs_on_to_the_sentence_end_past_its_length() -> None:
    said, reason, _ = speak("Paris is the capital of France. It is big.", answer_tokens=3)
    assert (said, reason) == ("Paris is the capital of France.", "stop")


def test_without_a_soft_length_the_hard_limit_leaves_it_incomplete() -> None:
    said, reason, _ = speak(RAMBLING, max_new_tokens=30)
    assert reason == "length"
    assert said.startswith("The capital of China is Beijing. Its friends include")


def test_a_repetition_loop_is_never_said_and_the_answer_completes() -> None:
    loop = "Beijing is the capital of China. " * 6
    said, reason, kept = speak(loop.strip(), max_new_tokens=200)
    assert (said, reason, kept) == ("Beijing is the capital of China.", "stop", said)


def test_a_phrase_loop_inside_a_sentence_keeps_one_copy() -> None:
    said, reason, _ = speak("It is very very very very very very very very very good.")
    assert reason == "stop"
    assert said == "It is very"


def test_an_answer_with_repeated_words_is_said_whole() -> None:
    answer = "The cat sat on the mat, and the dog sat on the rug. The end."
    said, reason, _ = speak(answer)
    assert (said, reason) == (answer, "stop")


def test_numbers_are_no_loop() -> None:
    vocab = Vocabulary()
    # Qwen2.5 writes numbers one digit a token: "1,000,000,000" repeats ",000" three times.
    digits = [vocab.token(ch) for ch in "1,000,000,000"]
    guard = ReplyGuard(lambda t: vocab.pieces[t])
    released: list[int] = []
    for token in digits:
        step = guard.feed(token)
        assert step.keep is None
        released += step.release
    released += guard.flush()
    assert vocab.text(released) == "1,000,000,000"


def test_held_tokens_are_released_once_the_repetition_breaks() -> None:
    vocab = Vocabulary()
    guard = ReplyGuard(lambda t: vocab.pieces[t])
    steps = [guard.feed(t) for t in vocab.encode("the sun and the moon")]
    # " the" repeats the reply's first token: held until " moon" shows it is no loop.
    assert [vocab.text(s.release) for s in steps] == [" the", " sun", " and", "", " the moon"]


def test_a_repeated_number_is_a_loop() -> None:
    vocab = Vocabulary()
    tokens = [vocab.token(ch) for ch in "1000. 1000. 1000. 1000."]
    guard = ReplyGuard(lambda t: vocab.pieces[t])
    released: list[int] = []
    for token in tokens:
        step = guard.feed(token)
        released += step.release
        if step.keep is not None:
            break
    assert vocab.text(released).strip() == "1000."
