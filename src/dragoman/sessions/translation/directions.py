"""What the translator keeps of each direction and each segment: the bookkeeping between the
segments the speech front hears and the utterances of a direction's `MTSession`.

Only the state and its one rule (utterance ids are taken in order); when a segment takes one, and
what goes to MT, is decided in `translator.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dragoman.sessions.mt.session import MTSession


@dataclass
class Direction:
    source: str
    target: str
    mt: MTSession
    seq: int = 0
    next_utterance: int = 0
    #: Finals sent and not yet answered: their utterance, by seq.
    pending_finals: dict[int, int] = field(default_factory=dict)
    #: Updates whose job failed: already reported, their `processing_failed` is not.
    failed: set[int] = field(default_factory=set)
    #: Utterances whose final translation came.
    closed: set[int] = field(default_factory=set)
    #: The segment (its item id) of each utterance.
    items: dict[int, str] = field(default_factory=dict)
    #: The input clock of each update not yet started, by seq (`Translator.started`).
    clocks: dict[int, float] = field(default_factory=dict)
    #: The input clock of the last update sent.
    clock_ms: float = 0.0
    #: The words of each utterance's final update not yet answered (`Translator._roll_over`).
    final_words: dict[int, tuple[str, ...]] = field(default_factory=dict)
    #: Segments heard while a final was unanswered, oldest first: each takes its utterance id
    #: once no final is (`Translator._release`).
    waiting: list[Segment] = field(default_factory=list)

    def new_utterance(self, item_id: str) -> int:
        """The next utterance id, taken by segment `item_id`."""
        utterance = self.next_utterance
        self.next_utterance += 1
        self.items[utterance] = item_id
        return utterance


#: An update held back until its segment has an utterance id: words, tail, clock, final.
_Held = tuple[tuple[str, ...], tuple[str, ...], float, bool]


@dataclass(eq=False)  # a segment is itself, not its fields (`waiting` finds it by identity)
class Segment:
    #: The target the segment is bound to from its first speech.
    target: str
    item_id: str
    #: Its direction, once its source language is known (its first transcript), and its
    #: utterance, once no earlier final of the direction is unanswered (-1 until then).
    direction: Direction | None = None
    utterance: int = -1
    #: Its latest update while it has no utterance.
    held: _Held | None = None
    #: Heard in the target language itself: its final transcript is the translation.
    passed: bool = False
    #: Heard in a language nothing translates into the target: dropped.
    refused: bool = False
    #: The segment's words sent last (its full state), to skip an update that changes nothing.
    last: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    #: Its first words that earlier utterances took (MT's forced finals): each update of its
    #: current utterance carries the words after them.
    offset: int = 0
