"""The simulation of simultaneous MT: a modelled ASR stream sent by the reference client.

An ASR that holds back its last words (`asr_state`, `next_asr_event`), the client that
paces updates the way WhisperLiveKit's does (`ClientStream`), and the real sans-I/O
`MTSession` and engine under a simulated clock: one sentence as one utterance
(`simulate`) or a talk's lines through one session (`run_document`). The model is
described in `bench.mt_simul`'s docstring.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bench.mt_data import Sentence
from bench.mt_metrics import Emission
from dragoman.engines.mt.base import DraftMode, MTDraft, MTEngine, MTRequest
from dragoman.sessions.mt.events import Init, InitOk, JobKind, MTJob, Translation, Update, Word
from dragoman.sessions.mt.session import MTSession
from dragoman.streaming.alignatt import AlignAttParams, clean_final_text

#: The reference client's pacing (WhisperLiveKit translation_alignatt.py).
MIN_PARTIAL_INTERVAL_MS = 500.0
PACING = 1.2
#: Large enough that no benchmark sentence is cut by a forced final.
MAX_UTTERANCE_WORDS = 10_000

#: A streaming ASR commits its held-back tail once no new word came for this long.
DEFAULT_PAUSE_COMMIT_MS = 600.0
#: `--document`: the speaker's pause between two lines of a talk.
DEFAULT_LINE_GAP_MS = 800.0

Timer = Callable[[], float]


def asr_state(
    ends: Sequence[float], now: float, *, tail_words: int, pause_commit_ms: float
) -> tuple[int, int]:
    """(committed, heard) words at `now` for an ASR holding back its last `tail_words`.

    After a pause of `pause_commit_ms` since the last heard word, the tail is committed
    too: the moment when the commit fast path can release held target tokens without
    a new engine call (the prompt's words are unchanged, only their accessibility).
    """
    heard = sum(1 for end in ends if end <= now)
    if heard and now - ends[heard - 1] >= pause_commit_ms:
        return heard, heard
    return max(0, heard - tail_words), heard


def next_asr_event(ends: Sequence[float], now: float, *, pause_commit_ms: float) -> float:
    """The first time after `now` at which the ASR state can change."""
    heard = sum(1 for end in ends if end <= now)
    events = [ends[heard]] if heard < len(ends) else []
    if heard and ends[heard - 1] + pause_commit_ms > now:
        events.append(ends[heard - 1] + pause_commit_ms)
    return min(events)


@dataclass
class SentenceRun:
    sentence: Sentence
    simul_text: str
    offline_text: str
    emissions: list[Emission]
    #: Engine drafts (partials and the final) for this utterance.
    engine_calls: int
    #: Partial answers that committed new text, and how many of them took no engine call.
    commits: int
    fast_path_commits: int
    #: Time spent answering each update (session + engine), ms.
    update_ms: list[float] = field(default_factory=list)
    offline_ms: float = 0.0
    #: One line per update: clock, words sent, time taken, engine calls, stop reason, delta.
    trace: list[str] = field(default_factory=list)
    #: Drafts that copied the source and were redrafted with the target language forced.
    copy_redrafts: int = 0
    #: Engine calls whose draft ran into a repetition loop, cut after its first copy.
    loop_cuts: int = 0


@dataclass
class ClientStream:
    """One connection of the reference client, across the utterances sent on it.

    Times inside `simulate` are the line's own (its first word starts near 0); the
    session sees them shifted by `offset_ms`, so its clock runs on across lines.
    """

    session: MTSession
    seq: int = 0
    utterance_id: int = 0
    #: Where the current line's time 0 is on the session's clock.
    offset_ms: float = 0.0
    #: When, on the session's clock, the last answer arrived (the engine is busy until then).
    free_at_ms: float = 0.0
    #: Earlier lines' offline translations: the offline baseline's own history.
    offline_history: list[tuple[str, str]] = field(default_factory=list)
    #: The session's copy-redraft count so far (it counts over all its utterances).
    copy_redrafts: int = 0


def open_stream(
    engine: MTEngine,
    *,
    session_id: str,
    direction: str,
    preset: str,
    overrides: dict[str, object] | None,
    presets: Mapping[str, AlignAttParams],
    stream_commits: bool = False,
) -> ClientStream:
    """A fresh session, initialised for `direction` as the reference client does; with
    `stream_commits`, one that sends its commits pass by pass, as the interpreter's do."""
    source_lang, target_lang = direction.split("-")
    session = MTSession(
        session_id=session_id,
        engine_name=engine.name,
        directions=engine.directions(),
        decode=engine.decode,
        default_preset=preset,
        max_utterance_words=MAX_UTTERANCE_WORDS,
        presets=presets,
        stream_commits=stream_commits,
    )
    session.receive(Init(1, source_lang, target_lang, preset=preset, overrides=overrides or {}))
    if not any(isinstance(e, InitOk) for e in session.events_to_send()):
        raise RuntimeError(f"the session refused {direction} with preset {preset}")
    return ClientStream(session)


@dataclass
class Answer:
    """What one update got: its last translation, and before it those its engine passes
    sent (`streamed`: ms after the update, committed text so far)."""

    translation: Translation
    calls: int
    took_ms: float
    loop_cuts: int
    streamed: list[tuple[float, str]]


def _answer(session: MTSession, engine: MTEngine, update: Update, timer: Timer) -> Answer:
    """Feed one update and run its engine work."""
    started = timer()
    session.receive(update)
    calls = loop_cuts = 0
    details = []
    elapsed_ms: float | None = None
    answers: list[tuple[float, Translation]] = []

    def collect() -> None:
        now = (timer() - started) * 1000.0
        answers.extend((now, e) for e in session.events_to_send() if isinstance(e, Translation))

    while (job := session.next_job()) is not None:
        if job.kind is JobKind.PREFILL:
            # The pause's work after an utterance (`sessions/mt/session.py`), which the server
            # does once the final is sent: neither this update's time nor one of its calls.
            elapsed_ms = (timer() - started) * 1000.0 if elapsed_ms is None else elapsed_ms
            session.job_done(job, engine.draft(job.request))
            continue
        calls += 1
        request = job.request
        if job.streaming:

            def on_pass(draft: MTDraft, job: MTJob = job) -> None:
                session.job_progress(job, draft)
                collect()

            request = replace(request, on_pass=on_pass)
        draft = engine.draft(request)
        details.append(_call_detail(job.kind.value, draft))
        loop_cuts += bool(draft.extra.get("loop_cuts"))
        session.job_done(job, draft)
    if elapsed_ms is None:
        elapsed_ms = (timer() - started) * 1000.0
    collect()
    mine = [(ms, e) for ms, e in answers if e.seq == update.seq]
    # One answer an update, after what its passes committed (`--stream-commits`), if any.
    if not mine or any(e.stop_reason != "alignatt:streamed" for _, e in mine[:-1]):
        raise RuntimeError(f"update {update.seq} got {len(mine)} translations")
    LAST_CALLS[:] = details
    streamed = [(ms, e.committed_text) for ms, e in mine[:-1]]
    return Answer(mine[-1][1], calls, elapsed_ms, loop_cuts, streamed)


#: What the engine calls of the last `_answer` did (for the --verbose trace).
LAST_CALLS: list[str] = []


def _call_detail(kind: str, draft: Any) -> str:
    """One engine call: its kind, prompt tokens (of them cached), tokens drafted (of them
    verified from the previous draft), and its own time."""
    extra = draft.extra
    return (
        f"{kind}: prompt {extra.get('prompt_tokens', 0):.0f} (cached {extra.get('cached_tokens', 0):.0f}, "
        f"inserted {extra.get('inserted_tokens', 0):.0f}) "
        f"drafted {len(draft.token_ids)} (speculated {extra.get('speculated_tokens', 0):.0f}, "
        f"accepted {extra.get('accepted_tokens', 0):.0f}) {extra.get('engine_ms', 0):.0f} ms"
        + (" (a repetition loop cut)" if extra.get("loop_cuts") else "")
    )


def _trace_line(now: float, state: tuple[int, int], took: float, calls: int, answer: Translation) -> str:
    line = (
        f"t={now:7.0f} committed={state[0]:3d} heard={state[1]:3d} took={took:6.0f} calls={calls} "
        f"{answer.stop_reason:28s} +{answer.committed_delta!r}"
    )
    return line + "".join(f"\n          {detail}" for detail in LAST_CALLS) if calls else line


def simulate(
    sentence: Sentence,
    engine: MTEngine,
    *,
    direction: str,
    preset: str,
    tail_words: int,
    pause_commit_ms: float = DEFAULT_PAUSE_COMMIT_MS,
    overrides: dict[str, object] | None = None,
    presets: Mapping[str, AlignAttParams],
    timer: Timer = time.perf_counter,
    stream: ClientStream | None = None,
    stream_commits: bool = False,
) -> SentenceRun:
    """Stream one sentence as one utterance; see `bench.mt_simul`'s docstring for the model.

    Without `stream` the sentence gets a fresh session of its own. With one, it is the
    next utterance of that stream's session, starting at `stream.offset_ms`, and the
    caller moves the offset on (see `run_document`).
    """
    source_lang, target_lang = direction.split("-")
    alone = stream is None
    if stream is None:
        stream = open_stream(
            engine,
            session_id=f"bench-{sentence.id}",
            direction=direction,
            preset=preset,
            overrides=overrides,
            presets=presets,
            stream_commits=stream_commits,
        )
    session, offset = stream.session, stream.offset_ms
    words = sentence.words

    def words_upto(n: int) -> tuple[Word, ...]:
        return tuple(Word(w.text, w.start_ms + offset, w.end_ms + offset) for w in words[:n])

    ends = [w.end_ms for w in words]
    run = SentenceRun(sentence, "", "", [], 0, 0, 0)
    free_at = max(0.0, stream.free_at_ms - offset)  # when the previous answer arrived
    earliest = 0.0  # pacing: no partial before this
    sent_state: tuple[int, int] | None = None
    while True:
        now = max(free_at, earliest)
        heard = sum(1 for end in ends if end <= now)
        if heard == len(words):
            break  # everything heard: the next update is the final one
        state = asr_state(ends, now, tail_words=tail_words, pause_commit_ms=pause_commit_ms)
        if heard == 0 or state == sent_state:
            # Nothing new to send: wait for the next word or the next pause commit.
            earliest = next_asr_event(ends, now, pause_commit_ms=pause_commit_ms)
            continue
        stream.seq += 1
        n_committed = state[0]
        update = Update(
            seq=stream.seq,
            utterance_id=stream.utterance_id,
            words=words_upto(n_committed),
            tail=tuple(w.text for w in words[n_committed:heard]),
            clock_ms=now + offset,
        )
        got = _answer(session, engine, update, timer)
        answer, calls, took = got.translation, got.calls, got.took_ms
        run.engine_calls += calls
        run.loop_cuts += got.loop_cuts
        run.update_ms.append(took)
        if got.streamed or answer.committed_delta:
            run.commits += 1
            run.fast_path_commits += calls == 0
        for ms, text in got.streamed:
            run.emissions.append(Emission(min(now, sentence.duration_ms), now + ms, text))
        run.emissions.append(Emission(min(now, sentence.duration_ms), now + took, answer.committed_text))
        run.trace.append(_trace_line(now, state, took, calls, answer))
        sent_state = state
        free_at = now + took
        earliest = now + max(MIN_PARTIAL_INTERVAL_MS, PACING * took)

    # End of source: the ASR commits everything and the client sends the final.
    now = max(free_at, sentence.duration_ms, ends[-1])
    stream.seq += 1
    final = Update(
        seq=stream.seq,
        utterance_id=stream.utterance_id,
        words=words_upto(len(words)),
        tail=(),
        clock_ms=now + offset,
        is_final=True,
    )
    got = _answer(session, engine, final, timer)
    answer, calls, took = got.translation, got.calls, got.took_ms
    run.engine_calls += calls
    run.loop_cuts += got.loop_cuts
    run.update_ms.append(took)
    run.simul_text = answer.committed_text
    run.trace.append(_trace_line(now, (len(words), len(words)), took, calls, answer))
    for ms, text in got.streamed:
        run.emissions.append(Emission(sentence.duration_ms, now + ms, text))
    run.emissions.append(Emission(sentence.duration_ms, now + took, answer.committed_text))
    stream.utterance_id += 1
    stream.free_at_ms = offset + now + took
    copy_redrafts = stream.session.stats.get("copy_redrafts", 0)
    run.copy_redrafts, stream.copy_redrafts = copy_redrafts - stream.copy_redrafts, copy_redrafts
    if alone:
        engine.forget(session.session_id)

    # As many pairs as the session's own policy keeps (the preset, or an init override).
    setup = session.setup
    pairs = setup.params.history_pairs if setup is not None and not alone else 0
    started = timer()
    offline = engine.draft(
        MTRequest(
            source_lang=source_lang,
            target_lang=target_lang,
            source_words=[w.text for w in words],
            mode=DraftMode.FINAL,
            history=tuple(stream.offline_history[-pairs:]) if pairs else (),
        )
    )
    run.offline_ms = (timer() - started) * 1000.0
    run.offline_text = clean_final_text(engine.decode(offline.token_ids)).strip()
    stream.offline_history.append((sentence.source, run.offline_text))
    return run


def run_document(
    sentences: Sequence[Sentence],
    engine: MTEngine,
    *,
    direction: str,
    preset: str,
    tail_words: int,
    presets: Mapping[str, AlignAttParams],
    pause_commit_ms: float = DEFAULT_PAUSE_COMMIT_MS,
    overrides: dict[str, object] | None = None,
    timer: Timer = time.perf_counter,
    line_gap_ms: float = DEFAULT_LINE_GAP_MS,
    on_line: Callable[[int, SentenceRun], None] | None = None,
    stream_commits: bool = False,
) -> list[SentenceRun]:
    """Stream `sentences` as one talk through one session (`--document`)."""
    stream = open_stream(
        engine,
        session_id=f"bench-doc-{direction}",
        direction=direction,
        preset=preset,
        overrides=overrides,
        presets=presets,
        stream_commits=stream_commits,
    )
    runs = []
    try:
        for index, sentence in enumerate(sentences, 1):
            run = simulate(
                sentence,
                engine,
                direction=direction,
                preset=preset,
                tail_words=tail_words,
                pause_commit_ms=pause_commit_ms,
                overrides=overrides,
                presets=presets,
                timer=timer,
                stream=stream,
            )
            runs.append(run)
            if on_line is not None:
                on_line(index, run)
            stream.offset_ms += sentence.duration_ms + line_gap_ms
    finally:
        engine.forget(stream.session.session_id)
    return runs
