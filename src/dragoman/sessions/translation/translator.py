"""The source transcript of each segment, as MT protocol v1 updates into an `MTSession`.

The speech front cuts the input into segments (its turns, by the VAD) and transcribes
each as it grows. Every partial transcript becomes an MT update with MT protocol v1's
own semantics: the FULL state of the open utterance, its firm words committed and the
unstable tail drafted over but never committed against ("Feeding the tail therefore
converts the ASR commit latency into MT speculation time"); the segment's final
transcript closes the utterance with a sticky `is_final`. The MT session does the rest:
AlignAtt, the commit fast path, coalescing (latest wins) and the final pass.

One `MTSession` per direction (what is kept of each, and of each segment, is in
`directions.py`): a switch of language applies from the next segment, while
the segments already under way finish in the language they began in. A segment's source is
the server's source language, or (`Languages.source` "auto") the language the speech front
heard it in; speech already in the target language is passed through as heard, and speech in
a language nothing translates into the target is an error, its segment left untranslated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dragoman.engines.asr.word_agreement import split_words
from dragoman.engines.mt.base import MTDraft
from dragoman.errors import ClientError, DragomanError, EngineFailure
from dragoman.sessions.mt.events import Error, Init, MTJob, Translation, Update, Word
from dragoman.sessions.mt.session import MTSession
from dragoman.sessions.mt.utterance import Decode
from dragoman.sessions.translation.config import AUTO, Languages
from dragoman.sessions.translation.directions import Direction, Segment
from dragoman.streaming.alignatt import AlignAttParams

#: Sources whose text goes to MT a character a word (`source_words`: `split_words` cuts Chinese
#: and Japanese script so), and the characters of their word, about (jieba's words of the eval
#: set's Chinese references average 1.7): their `max_utterance_words` is taken as this many
#: characters a word. At 60 characters MT force-closed a quarter of the FLORES sentences in the
#: middle (end lag 8.4 s on one of 93 characters).
CHARACTER_WORD_SOURCES = frozenset({"zh", "ja"})
CHARS_PER_WORD = 2


@dataclass(frozen=True)
class MTProfile:
    """What a translation session needs to know of the server's MT service."""

    engine_name: str
    directions: tuple[str, ...]
    decode: Decode
    default_preset: str
    presets: Mapping[str, AlignAttParams]
    max_utterance_words: int


#: (target language, the segment's item id, delta, whether it opens its utterance, whether it
#: closes it)
OnText = Callable[[str, str, str, bool, bool], None]


def source_words(text: str) -> tuple[str, ...]:
    """A transcript's words as MT takes them: between spaces, and one character a word in a
    script written without spaces (Chinese), as the speech front's word agreement cuts them."""
    return tuple(word for word in (w.strip() for w in split_words(text)) if word)


def split_transcript(text: str, stable_chars: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A partial transcript as (committed words, tail words): a word counts as committed
    only when all of it is inside the stable prefix."""
    committed: list[str] = []
    tail: list[str] = []
    end = 0
    for piece in split_words(text):
        end += len(piece)
        word = piece.strip()
        if word:
            (tail if tail or end > stable_chars else committed).append(word)
    return tuple(committed), tuple(tail)


class Translator:
    def __init__(
        self,
        session_id: str,
        profile: MTProfile,
        languages: Languages,
        on_text: OnText,
        on_error: Callable[[DragomanError], None],
    ) -> None:
        self.session_id = session_id
        self.profile = profile
        self.languages = languages
        self._on_text = on_text
        self._on_error = on_error
        self._directions: dict[tuple[str, str], Direction] = {}
        self._segments: dict[str, Segment] = {}
        #: Segments whose final transcript went out: a late partial of one is not a new segment.
        self._finished: set[str] = set()
        #: The target of segments that start from now on.
        self.target: str | None = None

    @property
    def cache_keys(self) -> list[str]:
        """The MT engine caches the session used (dropped when it ends)."""
        return [d.mt.session_id for d in self._directions.values()]

    @property
    def idle(self) -> bool:
        """Every segment's final translation is in."""
        return not any(d.pending_finals or d.waiting for d in self._directions.values())

    # -- transcripts in ---------------------------------------------------------------

    def begin(self, item_id: str) -> None:
        """Speech began: the segment is bound to the target language now, whatever update
        comes before its first transcript."""
        self._segment(item_id)

    def partial(
        self, item_id: str, text: str, stable_chars: int, clock_ms: float, language: str | None = None
    ) -> None:
        if language is None and self.languages.source == AUTO:
            return  # not bound before the engine says what it heard (at the latest, the final)
        segment = self._bound(item_id, language)
        if segment is None or segment.direction is None:
            return
        words, tail = split_transcript(text, stable_chars)
        if words == (segment.last[0] if segment.last else ()):
            # Only the tail changed (or no word is committed yet): AlignAtt commits nothing
            # against the tail, and the client sees only committed text, so a draft would be
            # speculation that the next update throws away (its words differ, so the commit fast
            # path never serves it). The engine is kept for updates that can commit.
            return
        segment.last = (words, tail)
        self._send(segment, words, tail, clock_ms, final=False)

    def final(self, item_id: str, transcript: str, clock_ms: float, language: str | None = None) -> None:
        segment = self._bound(item_id, language)
        self._segments.pop(item_id, None)
        self._finished.add(item_id)
        if segment is None or segment.refused:
            return
        if segment.passed:
            # Already in the target language: what was heard is what is said.
            self._on_text(segment.target, item_id, transcript.strip(), True, True)
            return
        assert segment.direction is not None
        self._send(segment, source_words(transcript), (), clock_ms, final=True)

    def abandon(self, item_id: str) -> None:
        """The segment failed to transcribe: its utterance is left; the next one closes it."""
        segment = self._segments.pop(item_id, None)
        self._finished.add(item_id)
        if segment is None or segment.direction is None:
            return
        if segment in segment.direction.waiting:
            segment.direction.waiting.remove(segment)
        else:
            segment.direction.closed.add(segment.utterance)

    def _segment(self, item_id: str) -> Segment | None:
        segment = self._segments.get(item_id)
        if segment is None and self.target is not None and item_id not in self._finished:
            segment = self._segments[item_id] = Segment(self.target, item_id)
        return segment

    def _bound(self, item_id: str, language: str | None) -> Segment | None:
        """The segment, its direction chosen by the language it was heard in (once)."""
        segment = self._segment(item_id)
        if segment is None or segment.direction is not None or segment.passed or segment.refused:
            return segment
        try:
            source = self.languages.heard(language, segment.target)
        except ClientError as exc:
            segment.refused = True
            self._on_error(exc)
            return segment
        if source == segment.target:
            segment.passed = True
            return segment
        direction = segment.direction = self._direction(source, segment.target)
        if direction.pending_finals or direction.waiting:
            # An earlier segment's final may yet be answered by a forced final, whose last
            # words then go on in the next utterance (`_roll_over`): that id is theirs.
            direction.waiting.append(segment)
        else:
            segment.utterance = direction.new_utterance(item_id)
        return segment

    def _direction(self, source: str, target: str) -> Direction:
        direction = self._directions.get((source, target))
        if direction is None:
            profile = self.profile
            mt = MTSession(
                session_id=f"{self.session_id}-{source}-{target}",
                engine_name=profile.engine_name,
                directions=profile.directions,
                decode=profile.decode,
                default_preset=profile.default_preset,
                max_utterance_words=profile.max_utterance_words
                * (CHARS_PER_WORD if source in CHARACTER_WORD_SOURCES else 1),
                presets=profile.presets,
                stream_commits=True,
            )
            mt.receive(Init(protocol_version=1, source_lang=source, target_lang=target))
            direction = self._directions[source, target] = Direction(source, target, mt)
            self._drain(direction)
        return direction

    def _send(
        self,
        segment: Segment,
        words: tuple[str, ...],
        tail: tuple[str, ...],
        clock_ms: float,
        *,
        final: bool,
    ) -> None:
        direction = segment.direction
        assert direction is not None, "bound before its first update"
        if segment.utterance < 0:
            segment.held = (words, tail, clock_ms, final)  # the full state: the latest wins
            return
        words = words[segment.offset :]
        direction.seq += 1
        direction.clocks[direction.seq] = direction.clock_ms = clock_ms
        if final:
            direction.pending_finals[direction.seq] = segment.utterance
            direction.final_words[segment.utterance] = words
        update = Update(
            seq=direction.seq,
            utterance_id=segment.utterance,
            words=tuple(Word(w) for w in words),
            tail=tail,
            clock_ms=clock_ms,
            is_final=final,
        )
        direction.mt.receive(update)
        self._drain(direction)

    # -- the MT lane --------------------------------------------------------------------

    def next_job(self) -> MTJob | None:
        """The next draft, of the oldest direction that has one (finals of a language left behind
        finish first). Planning may answer without the engine (the commit fast path)."""
        for direction in list(self._directions.values()):
            job = direction.mt.next_job()
            self._drain(direction)
            if job is not None:
                return job
        return None

    def started(self, job: MTJob) -> tuple[str, float | None]:
        """A job `next_job` gave: its segment, and the input clock of its update (None for a
        redraft, whose update started before); the updates before it were answered or coalesced."""
        direction = self._owner(job)
        clock = direction.clocks.get(job.seq)
        for seq in [s for s in direction.clocks if s <= job.seq]:
            del direction.clocks[seq]
        return direction.items.get(job.utterance_id, ""), clock

    @property
    def stats(self) -> dict[str, int]:
        """The MT sessions' counters summed: drafts, fast-path answers, coalesced partials."""
        total: dict[str, int] = {}
        for direction in self._directions.values():
            for name, count in direction.mt.stats.items():
                total[name] = total.get(name, 0) + count
        return total

    def job_progress(self, job: MTJob, draft: MTDraft) -> None:
        """The draft so far of a streaming MT job: its commits are said before the draft ends."""
        direction = self._owner(job)
        direction.mt.job_progress(job, draft)
        self._drain(direction)

    def job_done(self, job: MTJob, draft: MTDraft) -> None:
        direction = self._owner(job)
        try:
            direction.mt.job_done(job, draft)
        except Exception as exc:  # a malformed draft: the update is dropped, as a failed call
            direction.mt.job_failed(job, EngineFailure(f"malformed MT draft: {exc}"))
        self._drain(direction)

    def job_failed(self, job: MTJob, error: DragomanError) -> None:
        direction = self._owner(job)
        direction.failed.add(job.seq)
        if not job.cancel.cancelled:
            self._on_error(error)
        direction.mt.job_failed(job, error)
        self._drain(direction)

    def _owner(self, job: MTJob) -> Direction:
        for direction in self._directions.values():
            if direction.mt.session_id == job.request.cache_key:
                return direction
        raise ValueError("an MT job of no direction of this session")

    # -- MT events out ------------------------------------------------------------------

    def _drain(self, direction: Direction) -> None:
        for event in direction.mt.events_to_send():
            if isinstance(event, Translation):
                self._translation(direction, event)
            elif isinstance(event, Error):
                self._error(direction, event)
            # InitOk: nothing to tell the client.
        self._release(direction)

    def _release(self, direction: Direction) -> None:
        """Give the waiting segments their utterance ids, in the order they were heard, while
        no final is unanswered, and send what each held. MT would not have drafted them
        before the final anyway: it takes an utterance only after the one before closed."""
        while direction.waiting and not direction.pending_finals:
            segment = direction.waiting.pop(0)
            segment.utterance = direction.new_utterance(segment.item_id)
            if segment.held is not None:
                (words, tail, clock_ms, final), segment.held = segment.held, None
                self._send(segment, words, tail, clock_ms, final=final)

    def _translation(self, direction: Direction, event: Translation) -> None:
        if event.utterance_id in direction.closed:
            # A forced final again, for an update that was on its way: a final among them is
            # answered by it (its words went on in the next utterance, `_roll_over`).
            direction.pending_finals.pop(event.seq, None)
            return
        item_id = direction.items.get(event.utterance_id, "")
        if event.final:
            direction.pending_finals.pop(event.seq, None)
            direction.closed.add(event.utterance_id)
            direction.items.pop(event.utterance_id, None)
        opens = event.committed_text == event.committed_delta
        if event.committed_delta or event.final:
            self._on_text(direction.target, item_id, event.committed_delta, opens, event.final)
        if event.forced_final:
            self._roll_over(direction, event.utterance_id, item_id, event.covered_source_units or 0)
        elif event.final:
            direction.final_words.pop(event.utterance_id, None)

    def _roll_over(self, direction: Direction, utterance: int, item_id: str, covered: int) -> None:
        """MT closed a long utterance (`forced_final`) over its first `covered` words: the
        segment goes on in the next utterance, whose updates carry only the words after them
        (however often a long segment is closed so: carrying them, and leaving MT to drop the
        run the last forced final took, had its third utterance translate the first two again).
        A segment whose final transcript went out while the forced final was drafted has the
        rest of that final sent again, to the next utterance: MT answers the first with the
        forced final, and the utterance right after is one that no segment heard meanwhile has
        taken (`_bound`)."""
        for segment in self._segments.values():
            if segment.direction is direction and segment.utterance == utterance:
                segment.utterance = direction.new_utterance(item_id)
                segment.offset += covered
                segment.last = None
                return
        words = direction.final_words.pop(utterance, None)
        if words is not None and direction.next_utterance == utterance + 1:
            ended = Segment(direction.target, item_id, direction, direction.new_utterance(item_id))
            self._send(ended, words[covered:], (), direction.clock_ms, final=True)

    def _error(self, direction: Direction, event: Error) -> None:
        if event.seq is not None:
            utterance = direction.pending_finals.pop(event.seq, None)
            if utterance is not None:
                # The final failed: its utterance is left for the next to close (MT keeps it
                # open for a retry the interpreter does not make), and its words are not sent again.
                direction.final_words.pop(utterance, None)
            if event.seq in direction.failed:
                direction.failed.discard(event.seq)
                return  # reported with the engine's own error
        self._on_error(EngineFailure(f"translation: {event.message}", error_id=event.error_id))
