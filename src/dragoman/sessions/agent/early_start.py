"""The early start: an answer prepared while the user's closing silence runs out.

With server_vad, a turn ends after `silence_duration_ms` of silence (500 ms by default);
with semantic_vad, after a 200 ms pause and the turn model's call (later when the model judges
the turn incomplete). Either way its final transcript would then take another decode. The
speech front does not wait for it: the moment a silence begins in the turn it decodes the turn
whole, and once that transcript is back, with no speech since, says so (`Provisional`); the
agent starts the response on it at once, so the LLM's prefill and first words overlap the rest
of the silence. (Deciding at a 200 ms pause with the turn model first, the transcript came
after server_vad had ended the turn: the early start fired on 0 of 12 questions with the 1.5B
and all three services loaded.)

The response is held: it runs (the LLM generates, TTS speaks) but its events wait, so the
client sees what it always sees, in the usual order: `speech_stopped`, `committed`, the
turn's `completed` transcript, and only then the response. When no speech came back before
the turn ended, the pause's decode heard all of it and is the turn's final transcript (the
speech front decodes nothing again: `Item.decoded_whole`), so the held events go out as
soon as the silence runs out. When the user speaks again first (`TurnResumed`), the held
response is dropped without a word to the client and its engine work cancelled; so is one
whose final transcript, decoded afresh, says other words.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from dragoman.sessions.agent import events as out
from dragoman.sessions.agent.conversation import Conversation
from dragoman.sessions.agent.response import ResponseRun

_WORDS = re.compile(r"\w+")


def same_words(one: str, other: str) -> bool:
    """Whether two transcripts say the same words (case and punctuation aside)."""
    return _WORDS.findall(one.lower()) == _WORDS.findall(other.lower())


@dataclass
class Speculation:
    """A held response to a turn not yet over."""

    item_id: str
    transcript: str
    response: ResponseRun
    #: The last conversation item before the turn: the turn goes in after it, before the answer.
    before: str | None
    held: list[out.ServerEvent] = field(default_factory=list)

    def drop(self, conversation: Conversation) -> None:
        """Cancel the response's work and forget what it said, sent to no one."""
        for job in self.response.in_flight():
            job.cancel.cancel()
        self.response.done = True
        for item in self.response.output_items:
            if item.id is not None:
                conversation.remove(item.id)
        self.held.clear()

    def release(self, turn_id: str) -> list[out.ServerEvent]:
        """The held events, with the answer placed after the user's turn, not before it."""
        released: list[out.ServerEvent] = []
        for event in self.held:
            if isinstance(event, out.ItemAdded | out.ItemDone) and event.previous_item_id == self.before:
                event = dataclasses.replace(event, previous_item_id=turn_id)
            released.append(event)
        self.held.clear()
        return released
