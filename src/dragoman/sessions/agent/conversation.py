"""An agent session's conversation: its items in order, and the LLM's view of them.

Items are OpenAI's: messages (user, assistant, system), function calls and their
outputs. The client adds items with `conversation.item.create` (OpenAI:
"previous_item_id ... If set to `root`, the new item will be added to the beginning
of the conversation. If set to an existing ID, it allows an item to be inserted
mid-conversation. If the ID cannot be found, an error will be returned"), the
speech front adds the user's spoken turns, and responses add the assistant's.

The LLM sees the conversation as chat messages: the instructions as the system
prompt, then every item in order. What the assistant was cut off saying in a
barge-in is kept as far as it was spoken, so the model knows what the user heard.
When the conversation outgrows the model's context, its oldest items are left out.

For each assistant message that was spoken, the conversation also keeps where in its
audio each clause begins (`SpokenAudio`), so that `conversation.item.truncate` can cut
the transcript to what the client says it played.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.engines.llm.base import ChatMessage, ToolCall
from dragoman.errors import InvalidValue
from dragoman.sessions.agent.events import FunctionCall, FunctionCallOutput, Item, Message

#: OpenAI: "If set to `root`, the new item will be added to the beginning of the conversation."
ROOT = "root"


def new_id(prefix: str) -> str:
    """An id in OpenAI's style (`item_…`, `resp_…`, `call_…`)."""
    return f"{prefix}_{secrets.token_hex(10)}"


@dataclass(frozen=True)
class SpokenAudio:
    """An assistant message's audio: its length, and each clause's start in it with the text it
    added to the transcript (joiner included), in order."""

    duration_ms: float
    clauses: tuple[tuple[float, str], ...]

    def cut(self, end_ms: float) -> tuple[SpokenAudio, str]:
        """The audio played only up to `end_ms`, and its transcript: the clauses whose audio
        had begun by then (a clause heard in part counts as heard)."""
        kept = tuple(clause for clause in self.clauses if clause[0] < end_ms)
        return SpokenAudio(min(end_ms, self.duration_ms), kept), "".join(text for _, text in kept).strip()


class Conversation:
    def __init__(self) -> None:
        self._items: list[Item] = []
        self._audio: dict[str, SpokenAudio] = {}

    def __len__(self) -> int:
        return len(self._items)

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(self._items)

    @property
    def last_id(self) -> str | None:
        return self._items[-1].id if self._items else None

    def add(self, item: Item, previous_item_id: str | None = None) -> tuple[Item, str | None]:
        """Insert `item` (given an id when it has none) after `previous_item_id`, at the
        end when None; returns the item and the id of the item before it. Raises InvalidValue."""
        if item.id is None:
            item = dataclasses.replace(item, id=new_id("item"))
        elif self._index(item.id) is not None:
            raise InvalidValue(
                f"An item with id {item.id!r} is already in the conversation.", param="item.id"
            )
        if isinstance(item, FunctionCallOutput) and not self._has_call(item.call_id):
            raise InvalidValue(
                f"No function call with call_id {item.call_id[:64]!r} is in the conversation.",
                param="item.call_id",
            )
        if previous_item_id is None:
            position = len(self._items)
        elif previous_item_id == ROOT:
            position = 0
        else:
            found = self._index(previous_item_id)
            if found is None:
                raise InvalidValue(
                    f"previous_item_id {previous_item_id[:64]!r} is not in the conversation.",
                    param="previous_item_id",
                )
            position = found + 1
        self._items.insert(position, item)
        previous = self._items[position - 1].id if position > 0 else None
        return item, previous

    def replace(self, item: Item) -> None:
        """Put the new state of an item already in the conversation in its place."""
        assert item.id is not None
        index = self._index(item.id)
        if index is None:
            raise KeyError(item.id)
        self._items[index] = item

    def remove(self, item_id: str) -> None:
        index = self._index(item_id)
        if index is not None:
            del self._items[index]
        self._audio.pop(item_id, None)

    def record_audio(self, item_id: str, audio: SpokenAudio) -> None:
        self._audio[item_id] = audio

    def audio_of(self, item_id: str) -> SpokenAudio | None:
        return self._audio.get(item_id)

    def previous_of(self, item_id: str) -> str | None:
        """The id of the item before `item_id` (None at the start, or when it is not here)."""
        index = self._index(item_id)
        return self._items[index - 1].id if index else None

    def get(self, item_id: str) -> Item | None:
        index = self._index(item_id)
        return None if index is None else self._items[index]

    def _index(self, item_id: str) -> int | None:
        for index, item in enumerate(self._items):
            if item.id == item_id:
                return index
        return None

    def _has_call(self, call_id: str) -> bool:
        return any(isinstance(item, FunctionCall) and item.call_id == call_id for item in self._items)

    # -- the LLM's view ------------------------------------------------------------

    def messages(
        self, instructions: str, max_chars: int, items: Sequence[Item] | None = None
    ) -> tuple[ChatMessage, ...]:
        """The chat the LLM continues: the instructions, then the newest items that fit in
        `max_chars` (a bound on the prompt; the oldest items are left out first). `items`: a
        response's own context (`response.create`'s `input`) instead of the conversation."""
        turns: list[ChatMessage] = []
        for item in self._items if items is None else items:
            message = _chat_message(item)
            if message is None:
                continue
            if message.tool_calls and turns and turns[-1].role == "assistant" and not turns[-1].tool_calls:
                # The model's lead-in and the call it then made are one assistant turn.
                lead = turns.pop()
                message = dataclasses.replace(message, content=lead.content)
            turns.append(message)
        budget = max_chars - len(instructions)
        kept: list[ChatMessage] = []
        for message in reversed(turns):
            budget -= len(message.content) + sum(len(c.arguments) for c in message.tool_calls)
            if budget < 0 and kept:
                break
            kept.append(message)
        kept.reverse()
        while kept and kept[0].role == "tool":
            kept.pop(0)  # a tool result without its call would confuse the model
        system = (ChatMessage("system", instructions),) if instructions else ()
        return system + tuple(kept)


def _chat_message(item: Item) -> ChatMessage | None:
    if isinstance(item, FunctionCall):
        call = ToolCall(call_id=item.call_id, name=item.name, arguments=item.arguments)
        return ChatMessage("assistant", "", tool_calls=(call,))
    if isinstance(item, FunctionCallOutput):
        return ChatMessage("tool", item.output, tool_call_id=item.call_id)
    text = _text(item)
    if not text:
        return None  # a turn not yet (or never) transcribed, or a response that said nothing
    return ChatMessage(item.role, text)


def _text(message: Message) -> str:
    parts = [part.text if part.text is not None else part.transcript for part in message.content]
    return " ".join(part.strip() for part in parts if part and part.strip())
