"""One assistant turn on llama.cpp: prefill what the cache lacks, speak, and call tools under a grammar.

The turn runs in phases on the one sequence of `LlamaRuntime`:

1. Prefill: the prompt's tokens past the longest common prefix with what the
   sequence holds (the conversation's earlier turns) are decoded; that prefix is
   the turn's `cached_tokens`.
2. Speak: tokens are sampled freely and pass `ReplyGuard`, which holds back a
   repetition loop and ends a long reply at a sentence end; their text then goes
   through `MarkupFilter`,
   which passes on the spoken text and spots the start of a tool call: Qwen2.5's
   `<tool_call>` token, or a fenced or bare `{"name": ...}`. The sequence is then
   cut back to the spoken text and `<tool_call>` written after it, as the chat
   template writes a call, so the next turn's prompt matches it.
3. Call: from there the call object is sampled under the grammar of the offered
   tools (`grammar.call_grammar`), so it always parses and its arguments fit the
   tool's schema. The call's closing tag is then decoded, and one or two tokens
   more show whether the model calls another tool or ends its turn.

`tool_choice` "required" or a forced tool skips phase 2: `<tool_call>` is put at
the start of the reply and phase 3 starts at once.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dragoman.engines.llm.base import FinishReason, ForcedTool, LLMPiece, TextPiece, ToolCallPiece, ToolSpec
from dragoman.engines.llm.calls import find_object_end, parse_call_object
from dragoman.engines.llm.grammar import call_grammar
from dragoman.engines.llm.kv_snapshots import common_prefix
from dragoman.engines.llm.llama_runtime import MIN_LAST_CHUNK, LlamaRuntime, Sampler
from dragoman.engines.llm.markup import CLOSE_TAG, OPEN_TAG, CallStart, MarkupFilter
from dragoman.engines.llm.reply_guard import ReplyGuard
from dragoman.engines.workers import CancelToken
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Most calls in one turn (Qwen2.5 writes parallel calls one after another).
MAX_CALLS = 4
#: Most tokens one call object may take: a runaway string stops here.
MAX_CALL_TOKENS = 384
#: Tokens sampled after a call to see whether another follows ("\n", "<tool_call>").
_PROBE_TOKENS = 2


@dataclass(frozen=True)
class TurnPlan:
    prompt: list[int]
    #: The tools the model may call now (empty: none).
    tools: tuple[ToolSpec, ...]
    #: The tools of the request: a call to one of them is markup to cut even when none may be called.
    offered: tuple[ToolSpec, ...]
    #: Start with a call ("required" or a forced tool) instead of text.
    call_first: bool
    #: Only one call (a forced tool).
    single_call: bool
    max_new_tokens: int
    temperature: float
    seed: int
    #: Past this many tokens the spoken reply ends at the next sentence end (None: no soft end).
    answer_tokens: int | None = None


@dataclass
class TurnOutcome:
    reason: FinishReason
    cached_tokens: int
    output_tokens: int
    #: What the sequence holds now, position by position.
    sequence: list[int]


class _Stop(Exception):
    def __init__(self, reason: FinishReason) -> None:
        self.reason = reason


class Turn:
    def __init__(
        self,
        runtime: LlamaRuntime,
        plan: TurnPlan,
        held: Sequence[int],
        cancel: CancelToken,
        emit: Callable[[LLMPiece], None],
    ) -> None:
        self._rt = runtime
        self._plan = plan
        self._held = list(held)
        self._cancel = cancel
        self._emit = emit
        self._seq: list[int] = []
        self._generated = 0
        self._calls = 0
        self._open_tag = self._single_token(OPEN_TAG)

    def run(self) -> TurnOutcome:
        cached = self._prefill()
        try:
            if self._cancel.cancelled:
                raise _Stop("cancelled")
            if self._plan.call_first:
                self._call_loop()
            else:
                self._speak()
            reason: FinishReason = "tool_calls" if self._calls else "stop"
        except _Stop as stop:
            reason = stop.reason
            if reason == "stop" and self._calls:
                reason = "tool_calls"
        return TurnOutcome(reason, cached, self._generated, self._seq)

    # -- phases ---------------------------------------------------------------------------

    def _prefill(self) -> int:
        prompt = self._plan.prompt
        # The last prompt tokens are decoded again, whatever is cached: their logits start the
        # reply, and they go in one batch as they would in a whole prefill (MIN_LAST_CHUNK).
        cached = max(0, min(common_prefix(self._held, prompt), len(prompt) - MIN_LAST_CHUNK))
        self._rt.truncate(cached)
        self._seq = prompt[:cached]
        done = self._rt.decode(prompt[cached:], cached, self._cancel)
        self._seq += prompt[cached : cached + done]
        return cached

    def _speak(self) -> None:
        plan = self._plan
        markup = MarkupFilter(plan.offered, parse_calls=False)
        sampler = self._rt.sampler(temperature=plan.temperature, seed=plan.seed)
        reply_start = len(self._seq)
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        guard = ReplyGuard(self._text_of, answer_tokens=plan.answer_tokens)
        ends: list[int] = []  # after each said reply token: where its text ends in markup.raw
        start: CallStart | None = None

        def say(tokens: Sequence[int]) -> CallStart | None:
            for token in tokens:
                events = markup.feed(utf8.decode(self._rt.piece(token)))
                ends.append(len(markup.raw))
                self._send(events)
                found = next((e for e in events if isinstance(e, CallStart)), None)
                if found is not None:
                    return found
            return None

        try:
            while start is None:
                try:
                    token = self._sample(sampler)
                except _Stop as stop:
                    if stop.reason == "length":
                        say(guard.flush())  # what is held is no loop: the limit cut it
                        self._send(markup.finish())
                    raise
                if self._rt.is_eog(token):
                    if say(guard.flush()) is None:
                        self._send(markup.finish())
                    raise _Stop("stop")
                step = guard.feed(token)
                if step.ended:
                    if say(step.release) is None:
                        self._send(markup.finish())
                    raise _Stop("stop")  # a whole sentence, past the answer's length
                self._push(token)
                start = say(step.release)
                if start is None and step.keep is not None:
                    # A loop: the sequence keeps the reply up to its first copy.
                    log.info("llm repetition loop cut", kept_tokens=step.keep)
                    self._truncate(reply_start + step.keep)
                    self._send(markup.finish())
                    raise _Stop("stop")
        finally:
            sampler.close()
        if not plan.tools:
            raise _Stop("stop")  # markup where no tool may be called: end the turn there
        self._open_call(reply_start, ends, start.spoken_end(markup.raw), markup.raw)
        self._call_loop()

    def _text_of(self, token: int) -> str:
        return self._rt.piece(token).decode("utf-8", errors="ignore")

    def _truncate(self, length: int) -> None:
        self._rt.truncate(length)
        del self._seq[length:]

    def _open_call(self, reply_start: int, ends: list[int], spoken_end: int, raw: str) -> None:
        """Cut the reply back to its spoken text and open the call the way the chat template does.

        Whatever markup the model began with (a fence, a bare object, the tag after a line
        break), the sequence then reads `<text>\n<tool_call>\n`, as the next turn's prompt
        will render it, so that turn's prefix matches through the call.
        """
        keep = next((i + 1 for i, end in enumerate(ends) if end >= spoken_end), 0) if spoken_end else 0
        kept_text = raw[: ends[keep - 1]] if keep else ""
        opener = OPEN_TAG + "\n" if not kept_text or kept_text.endswith("\n") else "\n" + OPEN_TAG + "\n"
        self._truncate(reply_start + min(keep, len(self._seq) - reply_start))
        self._push_all(self._rt.tokenize_plain(opener))

    def _call_loop(self) -> None:
        plan = self._plan
        grammar = call_grammar(plan.tools)
        while True:
            self._call_one(grammar)
            if plan.single_call or self._calls >= MAX_CALLS or not self._another_call():
                raise _Stop("stop")

    def _call_one(self, grammar: str) -> None:
        sampler = self._rt.sampler(temperature=self._plan.temperature, seed=self._plan.seed, grammar=grammar)
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        text = ""
        try:
            for _ in range(MAX_CALL_TOKENS):
                token = self._sample(sampler)
                if self._rt.is_eog(token):
                    break
                text += utf8.decode(self._rt.piece(token))
                self._push(token)
                brace = text.find("{")
                end = find_object_end(text, brace) if brace >= 0 else None
                if end is None:
                    continue
                try:
                    # strict=False: the grammar lets strings hold raw control characters.
                    call = parse_call_object(json.loads(text[brace:end], strict=False), self._plan.tools)
                except ValueError:
                    call = None
                if call is None:
                    break
                self._calls += 1
                self._emit(ToolCallPiece(call))
                return
        finally:
            sampler.close()
        log.warning("tool call left unfinished", text=text[:200])
        raise _Stop("length")

    def _another_call(self) -> bool:
        """Close the call as the template does and see whether the model opens another."""
        self._push_all(self._rt.tokenize_plain("\n" + CLOSE_TAG))
        closed = len(self._seq)
        sampler = self._rt.sampler(temperature=0.0, seed=self._plan.seed)
        try:
            for _ in range(_PROBE_TOKENS):
                if self._generated >= self._plan.max_new_tokens:
                    break  # the calls are whole: out of tokens only for more
                token = self._sample(sampler)
                if token == self._open_tag:
                    self._push(token)
                    return True
                if self._rt.is_eog(token) or self._rt.piece(token).strip():
                    break
                self._push(token)  # the line break between calls
        finally:
            sampler.close()
        # No other call: the sequence ends with the closing tag, as the template has it.
        self._truncate(closed)
        return False

    # -- tokens ---------------------------------------------------------------------------

    def _sample(self, sampler: Sampler) -> int:
        if self._cancel.cancelled:
            raise _Stop("cancelled")
        if self._generated >= self._plan.max_new_tokens:
            raise _Stop("length")
        self._generated += 1
        return sampler.sample()

    def _push(self, token: int) -> None:
        self._rt.decode([token], len(self._seq))
        self._seq.append(token)

    def _push_all(self, tokens: Sequence[int]) -> None:
        self._rt.decode(tokens, len(self._seq))
        self._seq += tokens

    def _send(self, events: Sequence[object]) -> None:
        for event in events:
            if isinstance(event, str):
                self._emit(TextPiece(event))

    def _single_token(self, text: str) -> int | None:
        tokens = self._rt.tokenize_plain(text)
        return tokens[0] if len(tokens) == 1 else None


def plan_choice(tools: Sequence[ToolSpec], choice: object) -> tuple[tuple[ToolSpec, ...], bool, bool]:
    """(tools the model may call, call first, single call) for a `tool_choice`."""
    if choice == "none" or not tools:
        return (), False, False
    if isinstance(choice, ForcedTool):
        return tuple(t for t in tools if t.name == choice.name), True, True
    return tuple(tools), choice == "required", False
