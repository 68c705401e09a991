"""Spoken text out of a model's raw output: tool-call markup found, held back and cut out.

A model streams its reply as text in which a tool call may begin at any point:
Qwen2.5 writes `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`,
others put the same object in a ```json fence or write it bare. `MarkupFilter`
takes the text as it comes and gives back what is safe to speak at once, holding
back only what might be the start of markup (`<tool`, a fence, `{"na`), so a
lead-in such as "Let me check." reaches TTS before the call is written.

Special tokens that leak as text (`<|im_end|>`) and stray closing tags are cut too, and
Qwen2.5's `<tools>` tag, which the 1.5B writes where it means `<tool_call>`, opens a call.
Whitespace at the ends of the spoken text is never sent: before a call it is the
line break that introduces the markup.

Two uses: the embedded engine stops at the `CallStart` and decodes the call itself
under a grammar (`parse_calls=False`); a remote engine whose server returns calls
as text lets the filter parse them into `ToolCall`s (`parse_calls=True`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dragoman.engines.llm.base import ToolCall, ToolSpec
from dragoman.engines.llm.calls import find_object_end, parse_call_object

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
#: The tag Qwen2.5's template puts around the tools' signatures. Qwen2.5-Coder-1.5B writes it
#: where it means to call one (`<tools></tools>`, bench.agent_tools): an opener where tools
#: are offered, markup to drop where none is, never speech.
TOOLS_TAG = "<tools>"
TOOLS_CLOSE_TAG = "</tools>"
_TAGS = (OPEN_TAG, CLOSE_TAG, TOOLS_TAG, TOOLS_CLOSE_TAG)
FENCE = "```"
#: Longest `<|...|>` special token the filter waits to see closed.
_MAX_SPECIAL = 40
#: A fence that opens a JSON object: ```json, ``` or ```tool_call, then the object.
_FENCED_OBJECT = re.compile(r"```[A-Za-z_]*[ \t]*\r?\n?\s*\{")
#: A bare call; its object opens at group 1. Qwen2.5-Coder-1.5B opens some with a doubled brace
#: (`{{"name": ...}}`, measured by bench.agent_tools), which is the call's markup, never speech.
_BARE_CALL = re.compile(r'(?:\{\s*)?(\{)\s*"name"\s*:')
#: Literals whose beginnings are held back at the end of the text until they are decided.
_HELD_LITERALS = (*_TAGS, "<|")
_CALL_CLOSERS = (CLOSE_TAG, TOOLS_CLOSE_TAG, FENCE)


@dataclass(frozen=True)
class CallStart:
    """A tool call begins in the raw text: its markup at `markup`, its JSON object at or after `offset`."""

    markup: int
    offset: int

    def spoken_end(self, raw: str) -> int:
        """Where the spoken text before the call ends in `raw` (its trailing whitespace excluded)."""
        return len(raw[: self.markup].rstrip())


Event = str | CallStart | ToolCall
_Verdict = tuple[Literal["call", "drop", "text", "wait"], int]


class MarkupFilter:
    """Feed raw text deltas; get spoken text, `CallStart`s and (with `parse_calls`) `ToolCall`s."""

    def __init__(self, tools: Sequence[ToolSpec] = (), *, parse_calls: bool, json_calls: bool = True) -> None:
        self._tools = tuple(tools)
        self._parse_calls = parse_calls
        #: A fenced or bare `{"name": ...}` counts as a call only where tools may be called;
        #: the `<tool_call>` tag always does.
        self._json_calls = json_calls and bool(tools)
        self.raw = ""
        self._pos = 0
        self._call_from: int | None = None
        self._stopped = False
        #: Strip leading whitespace: at the start of the reply and after a call.
        self._line_start = True
        #: A call just ended: a fence that follows closes it.
        self._after_call = False
        #: The open call began with a doubled brace: the "}" after its object is markup too.
        self._doubled = False

    def feed(self, delta: str) -> list[Event]:
        if self._stopped:
            return []
        self.raw += delta
        return self._scan(final=False)

    def finish(self) -> list[Event]:
        """The end of the output: flush held text; an unfinished call is dropped."""
        if self._stopped:
            return []
        events = self._scan(final=True)
        self._stopped = True
        return events

    # -- scanning -------------------------------------------------------------------------

    def _scan(self, *, final: bool) -> list[Event]:
        events: list[Event] = []
        while not self._stopped:
            if self._call_from is not None:
                if not self._scan_call(events):
                    break
                continue
            if self._doubled and not self._skip_doubled_closer(final=final):
                break
            marker = self._next_marker()
            if marker is None:
                end = len(self.raw) if final else self._held_from()
                self._speak(events, self.raw[self._pos : end], consume=final)
                break
            verdict, at = self._classify(marker, final=final)
            if verdict == "wait":
                self._speak(events, self.raw[self._pos : marker], consume=False)
                break
            if verdict == "text":
                self._speak(events, self.raw[self._pos : at], consume=False)
                continue
            self._speak(events, self.raw[self._pos : marker], consume=True)
            self._pos = at
            if verdict == "call":
                events.append(CallStart(marker, at))
                if self._parse_calls:
                    self._call_from = at
                    self._doubled = self.raw[marker] == "{" and at > marker
                else:
                    self._stopped = True
        return events

    def _next_marker(self) -> int | None:
        text = self.raw
        found = [text.find("<", self._pos)]
        if self._json_calls:
            found.append(text.find(FENCE, self._pos))
        found = [i for i in found if i >= 0]
        if self._json_calls and (brace := text.find("{", self._pos)) >= 0:
            found.append(brace)
        while found:
            first = min(found)
            if text[first] != "<" or text.startswith(("<|", OPEN_TAG[:2], CLOSE_TAG[:2]), first):
                return first
            # A plain "<" in text: look past it.
            found.remove(first)
            if (nxt := text.find("<", first + 1)) >= 0:
                found.append(nxt)
        return None

    def _classify(self, at: int, *, final: bool) -> _Verdict:
        text = self.raw
        rest = text[at:]
        if rest.startswith(OPEN_TAG):
            return "call", at + len(OPEN_TAG)
        if rest.startswith(TOOLS_TAG):
            return ("call" if self._tools else "drop"), at + len(TOOLS_TAG)
        for closer in (CLOSE_TAG, TOOLS_CLOSE_TAG):
            if rest.startswith(closer):
                return "drop", at + len(closer)
        if rest.startswith("<|"):
            close = rest.find("|>", 2, _MAX_SPECIAL)
            if close >= 0:
                return "drop", at + close + 2
            if len(rest) < _MAX_SPECIAL and not final:
                return "wait", at
            return "text", at + 2
        if rest.startswith(FENCE):
            match = _FENCED_OBJECT.match(rest)
            if match:
                return "call", at + match.end() - 1
            if self._after_call and not self.raw[self._pos : at].strip():
                return "drop", at + len(FENCE)  # the fence that closes a call
            if not final and _could_be_fence(rest):
                return "wait", at
            return "text", at + len(FENCE)
        if rest.startswith("{"):
            if match := _BARE_CALL.match(rest):
                return "call", at + match.start(1)
            if not final and _could_be_bare_call(rest):
                return "wait", at
            return "text", at + 1
        # "<t" or "</": a tag still arriving, or plain text.
        if not final and any(tag.startswith(rest) for tag in _TAGS):
            return "wait", at
        return "text", at + 1

    def _skip_doubled_closer(self, *, final: bool) -> bool:
        """Past the "}" that closes a doubled brace; False while only white space follows the call."""
        rest = self.raw[self._pos :]
        if not rest.strip() and not final:
            return False
        self._doubled = False
        if rest.lstrip().startswith("}"):
            self._pos += len(rest) - len(rest.lstrip()) + 1
        return True

    def _held_from(self) -> int:
        """Where a literal that the text ends with the beginning of starts (else the end)."""
        text = self.raw
        literals = (*_HELD_LITERALS, FENCE) if self._json_calls else _HELD_LITERALS
        for i in range(max(self._pos, len(text) - max(map(len, literals))), len(text)):
            tail = text[i:]
            if any(literal.startswith(tail) for literal in literals):
                return i
        return len(text)

    def _speak(self, events: list[Event], text: str, *, consume: bool) -> None:
        """Send `text` less its trailing whitespace, which is dropped (`consume`) or held."""
        kept = text.rstrip()
        self._pos += len(text) if consume else len(kept)
        if self._line_start:
            kept = kept.lstrip()
        if kept:
            events.append(kept)
            self._line_start = False
            self._after_call = False

    def _scan_call(self, events: list[Event]) -> bool:
        """Parse the open call; False while it is incomplete."""
        assert self._call_from is not None
        text = self.raw
        start = self._call_from
        while start < len(text) and text[start].isspace():
            start += 1
        if start >= len(text):
            return False
        if text[start] != "{":
            # Markup with no object after it: drop the markup, read on as text.
            self._call_from = None
            self._pos = start
            return True
        end = find_object_end(text, start)
        if end is None:
            return False
        try:
            call = parse_call_object(json.loads(text[start:end]), self._tools)
        except ValueError:
            call = None
        if call is not None:
            events.append(call)
        self._call_from = None
        self._pos = _skip_closer(text, end)
        self._line_start = True
        self._after_call = True
        return True


def _skip_closer(text: str, at: int) -> int:
    """Past the whitespace and closing tag or fence that end a call, if they are there yet."""
    stripped = at
    while stripped < len(text) and text[stripped].isspace():
        stripped += 1
    for closer in _CALL_CLOSERS:
        if text.startswith(closer, stripped):
            return stripped + len(closer)
    return at


def _could_be_fence(text: str) -> bool:
    """Whether more text could still make a fence that opens a JSON object."""
    return len(text) <= 24 and re.fullmatch(r"```[A-Za-z_]*[ \t]*\r?\n?\s*", text) is not None


def _could_be_bare_call(text: str) -> bool:
    """Whether more text could still make `{"name":` (or `{{"name":`)."""
    compact = re.sub(r"\s+", "", text)
    return len(text) <= 24 and ('{"name":'.startswith(compact) or '{{"name":'.startswith(compact))
