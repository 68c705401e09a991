"""The translation spoken: clauses in, TTS jobs out, their audio as 200 ms frames on one timeline.

Each newly committed piece of the translation is cut into clauses as it comes
(`streaming/clauses.py`), and each clause is spoken by the target language's voice
as soon as it is complete; an utterance's last words are spoken at its end. One
clause is spoken at a time, in order, so the output audio never overlaps itself.
Where the listener would run out of speech before the next clause mark, the words
committed since the last clause are spoken at once (three or more): a sentence with
no comma was spoken in one piece after the speaker stopped, and the listener heard
the last word 1.4-2.8 s later than now (FLEURS, 1 session, `bench.interpreter`).

A translation is often spoken longer than its source (Italian by Kokoro: 74 s for a 60 s
earnings call), or made slower than real time beside MT, and in a talk that does not pause the
listener fell further behind with every clause (19 s at its end; `bench.interpreter_talk`). So
a clause the listener would hear late after its text came (the clauses before it still being
made or heard) is spoken faster, in proportion to how late (`catch_up_speed`): up to 1.3, where
Whisper's round trip of 12 FLORES lines rose from 13.1 to 18.0 % WER for Kokoro's Italian and
from 64 to 77 % for espeak-ng's German. While the speaker is still talking, more is coming, so
a clause is judged by when its end would be heard: its own length counts, at the pace the voice
has spoken so far (a clause of 8 s begun on time had been spoken at 1.0, and every one after it
late). The earnings call's Italian then ended 10.9-12.6 s after the speaker; short phrases,
heard within 2.5 s of their text once the speaker stopped, keep the voice's own pace.

OpenAI: "Output audio deltas are 200 ms frames of PCM16 audio", stamped with
`elapsed_ms`. The frames sit on an output timeline that shares the input stream's
clock: a clause starts where the last one ended, or, when the voice has been quiet,
at the input clock when its audio came (on the 200 ms grid). A clause's last frame
is filled out with silence, so every frame is exactly 200 ms and the stamps step by 200.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dragoman.engines.workers import CancelToken, Priority
from dragoman.sessions.agent.jobs import SpeakRequest
from dragoman.sessions.translation.events import OutputAudioDelta
from dragoman.streaming.clauses import ClauseCutter, speakable, spoken_length

#: OpenAI's output frame.
FRAME_MS = 200
#: The output audio's rate: OpenAI's translation sessions speak 24 kHz PCM16.
OUTPUT_RATE = 24_000
#: How soon the listener may run out of speech before the words since the last clause are
#: spoken without waiting for a mark: about what the slowest voice (Kokoro, RTF 0.6 on one
#: core) takes to synthesise a short clause.
STARVING_MS = 1500
#: How late a clause would be heard after its text came (the clauses before it still being
#: made or heard) from which it is spoken faster, the lateness at which it is spoken fastest,
#: and that speed.
CATCH_UP_FROM_MS = 2500
CATCH_UP_FULL_MS = 5500
MAX_CATCH_UP = 1.3
#: A voice's ms a speech unit (`spoken_length`) before it has said anything: about 15 Latin
#: letters a second, English's pace (`clauses.WIDE_CHAR_WEIGHT`).
DEFAULT_UNIT_MS = 1000 / 15


def catch_up_speed(late_ms: float) -> float:
    """The speed of a clause heard `late_ms` after its text came: 1.0 up to `CATCH_UP_FROM_MS`,
    rising in proportion to `MAX_CATCH_UP` at `CATCH_UP_FULL_MS`."""
    share = (late_ms - CATCH_UP_FROM_MS) / (CATCH_UP_FULL_MS - CATCH_UP_FROM_MS)
    return round(1.0 + (MAX_CATCH_UP - 1.0) * min(max(share, 0.0), 1.0), 2)


def on_grid(ms: float, *, up: bool = False) -> int:
    """`ms` on the 200 ms grid of `elapsed_ms` (down, or `up`)."""
    steps = -(-ms // FRAME_MS) if up else ms // FRAME_MS
    return int(steps) * FRAME_MS


@dataclass(frozen=True)
class SpeakJob:
    """One clause of the translation to speak (streaming: PCM16 chunks come as they are made)."""

    request: SpeakRequest
    cancel: CancelToken = field(default_factory=CancelToken, compare=False)
    #: A listener is waiting on it.
    priority: Priority = Priority.INTERACTIVE
    streaming: bool = True


class SpokenOutput:
    """Clauses to speak, the TTS job in flight, and the output timeline."""

    def __init__(self, emit: Callable[[OutputAudioDelta], None], rate: int = OUTPUT_RATE) -> None:
        self._emit = emit
        self.rate = rate
        #: The utterance's clause cutter, made by its first text (in its target language).
        self._cutter: ClauseCutter | None = None
        #: The voice of the utterance's last text.
        self._voice = ""
        #: Clauses to speak, each with the input clock when its text came.
        self._clauses: deque[tuple[SpeakRequest, float]] = deque()
        self._job: SpeakJob | None = None
        #: Audio of the clause in flight not yet sent (less than a frame).
        self._pending = b""
        #: Where the next frame goes on the output timeline (ms), and whether the clause in
        #: flight has placed its first frame yet.
        self._cursor_ms = 0
        self._placed = False
        #: Seconds of audio sent.
        self.seconds = 0.0
        #: The voice's pace so far: speech units (`spoken_length`) said, and their ms at speed 1;
        #: `seconds` when the clause in flight began.
        self._units = 0
        self._units_ms = 0.0
        self._job_began_s = 0.0

    @property
    def frame_bytes(self) -> int:
        return self.rate * FRAME_MS // 1000 * 2

    @property
    def idle(self) -> bool:
        """Nothing left to say: no clause waiting, none being spoken."""
        return self._job is None and not self._clauses

    def say(self, text: str, voice: str, language: str, clock_ms: float) -> None:
        """Translated text in `language` as it is committed; each clause it completes is spoken,
        and what has come of the next one too where the listener would soon hear nothing."""
        if self._cutter is None:
            self._cutter = ClauseCutter(language=language, whole_word_pieces=True)
        self._voice = voice
        for clause in self._cutter.push(text):
            self._queue(clause, voice, clock_ms)
        self._feed(clock_ms)

    def _feed(self, clock_ms: float) -> None:
        """With nothing to say and the listener's audio running out within `STARVING_MS`, the
        words committed since the last clause are spoken as one (three words or more)."""
        if self._cutter is None or self._job is not None or self._clauses:
            return
        if self._cursor_ms - clock_ms > STARVING_MS:
            return
        clause = self._cutter.cut_words()
        if clause:
            self._queue(clause, self._voice, clock_ms)

    def end_utterance(self, voice: str, clock_ms: float) -> None:
        """The utterance is over: its last words are spoken, and the next one starts a new clause
        (its first clause cut early again)."""
        if self._cutter is not None:
            self._queue(self._cutter.finish(), voice, clock_ms)
        self._cutter = None

    def _queue(self, clause: str, voice: str, clock_ms: float) -> None:
        text = speakable(clause)
        if text:
            self._clauses.append((SpeakRequest(text, voice, 1.0, self.rate), clock_ms))

    # -- the TTS lane -------------------------------------------------------------------

    def next_job(self, clock_ms: float, talking: bool = False) -> SpeakJob | None:
        """The next clause to speak (`clock_ms`: the input clock now), faster the later the
        listener will hear it after its text came (`catch_up_speed`); while the speaker is
        `talking`, the later its end will be heard."""
        if self._job is not None or not self._clauses:
            return None
        request, came_ms = self._clauses.popleft()
        late = max(self._cursor_ms, clock_ms) - came_ms
        if talking:  # more is coming: judge the clause by when its end would be heard
            pace = self._units_ms / self._units if self._units else DEFAULT_UNIT_MS
            late += spoken_length(request.text) * pace
        speed = catch_up_speed(late)
        self._job = SpeakJob(replace(request, speed=speed) if speed != request.speed else request)
        self._placed = False
        self._job_began_s = self.seconds
        return self._job

    def chunk(self, job: SpeakJob, pcm: bytes, clock_ms: float) -> None:
        """A chunk of the clause's audio; `clock_ms` is the input clock now."""
        if job is not self._job or not pcm:
            return
        if not self._placed:
            self._placed = True
            self._cursor_ms = max(self._cursor_ms, on_grid(clock_ms, up=True))
        self._pending += pcm
        size = self.frame_bytes
        while len(self._pending) >= size:
            frame, self._pending = self._pending[:size], self._pending[size:]
            self._send(frame)

    def done(self, job: SpeakJob, clock_ms: float) -> None:
        """The clause is spoken: its last frame goes out, filled out with silence."""
        if job is not self._job:
            return
        if self._pending:
            self._send(self._pending.ljust(self.frame_bytes, b"\x00"))
        self._pending = b""
        self._job = None
        spoken_ms = 1000 * (self.seconds - self._job_began_s)
        if spoken_ms:  # a clause that failed says nothing of the voice's pace
            self._units += spoken_length(job.request.text)
            self._units_ms += spoken_ms * job.request.speed
        self._feed(clock_ms)

    def _send(self, frame: bytes) -> None:
        self._emit(OutputAudioDelta(frame, self.rate, self._cursor_ms))
        self._cursor_ms += FRAME_MS
        self.seconds += FRAME_MS / 1000

    def cancel(self) -> None:
        """Drop what is not said yet (the session is going away)."""
        self._clauses.clear()
        if self._job is not None:
            self._job.cancel.cancel()
