"""Simultaneous MT benchmark: quality next to offline, and LAAL, of the real session + engine.

    python -m bench.mt_simul --direction en-de --sentences 30 [--preset low_latency]

Each sentence is streamed through a fresh sans-I/O `MTSession` (no sockets: the
transport adds nothing to measure here) driving the real engine in-process, under a
simulated clock in which the source words arrive at their times and engine work
takes the time it measured:

- The client behaves like WhisperLiveKit's `translation_alignatt.py`: every update
  carries all committed words (with timestamps) plus the unstable tail; partial
  updates are sent only after the previous answer came back, at least 0.5 s apart
  and at least 1.2x the last call's duration apart (its `_MIN_PARTIAL_INTERVAL_SECONDS`
  and `_PACING`), with everything that arrived meanwhile coalesced into one update;
  at the end of the source an `is_final` update closes the utterance.
- The ASR is modelled as exact with a hold-back: of the words heard so far, the last
  `--tail-words` are the unstable tail and the rest are committed, until a pause of
  `--pause-commit-ms` commits the tail too (the case the commit fast path serves);
  the final update commits them all.
- Ideal delays are the audio position (`clock_ms`) of the update whose answer first
  held a target unit; computation-aware delays are the simulated time the answer
  arrived, so waiting for a busy engine counts. See `bench.mt_metrics`.

The offline baseline is one FINAL engine call on the whole sentence, as the session's
end-of-utterance pass makes it, without the streamed prefix.

With `--document`, the lines of a direction are one talk instead: they stream through
one session, one utterance each, `--line-gap-ms` apart, as the reference client sends
consecutive utterances. The session's clock runs on across lines, an engine still busy
with a line's final delays the next line's first update, and the preset's
`history_pairs` puts the previous lines (source and committed translation) in the
prompt. The offline baseline then gets as many of its own previous pairs. BLEU is also
scored at document level, all lines joined into one segment, as the issue scores it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.mt_data import DATASETS, DEFAULT_WORDS_PER_SECOND, Sentence, load
from bench.mt_metrics import Emission, sentence_laal
from bench.results import record
from dragoman.cpu import cpu_info
from dragoman.engines.mt.base import DraftMode, MTEngine, MTRequest
from dragoman.logs import configure as configure_logs
from dragoman.sessions.mt.events import Init, InitOk, Translation, Update, Word
from dragoman.sessions.mt.session import MTSession
from dragoman.streaming.alignatt import AlignAttParams, clean_final_text
from dragoman.streaming.alignatt_presets import policy_presets

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
) -> ClientStream:
    """A fresh session, initialised for `direction` as the reference client does."""
    source_lang, target_lang = direction.split("-")
    session = MTSession(
        session_id=session_id,
        engine_name=engine.name,
        directions=engine.directions(),
        decode=engine.decode,
        default_preset=preset,
        max_utterance_words=MAX_UTTERANCE_WORDS,
        presets=presets,
    )
    session.receive(Init(1, source_lang, target_lang, preset=preset, overrides=overrides or {}))
    if not any(isinstance(e, InitOk) for e in session.events_to_send()):
        raise RuntimeError(f"the session refused {direction} with preset {preset}")
    return ClientStream(session)


def _answer(
    session: MTSession, engine: MTEngine, update: Update, timer: Timer
) -> tuple[Translation, int, float, int]:
    """Feed one update and run its engine work; (its translation, engine calls, ms taken,
    calls whose draft had a repetition loop cut)."""
    started = timer()
    session.receive(update)
    calls = loop_cuts = 0
    details = []
    while (job := session.next_job()) is not None:
        calls += 1
        draft = engine.draft(job.request)
        details.append(_call_detail(job.kind.value, draft))
        loop_cuts += bool(draft.extra.get("loop_cuts"))
        session.job_done(job, draft)
    elapsed_ms = (timer() - started) * 1000.0
    answers = [e for e in session.events_to_send() if isinstance(e, Translation) and e.seq == update.seq]
    if len(answers) != 1:
        raise RuntimeError(f"update {update.seq} got {len(answers)} translations")
    LAST_CALLS[:] = details
    return answers[0], calls, elapsed_ms, loop_cuts


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
) -> SentenceRun:
    """Stream one sentence as one utterance; see the module docstring for the model.

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
        answer, calls, took, loop_cuts = _answer(session, engine, update, timer)
        run.engine_calls += calls
        run.loop_cuts += loop_cuts
        run.update_ms.append(took)
        if answer.committed_delta:
            run.commits += 1
            run.fast_path_commits += calls == 0
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
    answer, calls, took, loop_cuts = _answer(session, engine, final, timer)
    run.engine_calls += calls
    run.loop_cuts += loop_cuts
    run.update_ms.append(took)
    run.simul_text = answer.committed_text
    run.trace.append(_trace_line(now, (len(words), len(words)), took, calls, answer))
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
) -> list[SentenceRun]:
    """Stream `sentences` as one talk through one session (`--document`)."""
    stream = open_stream(
        engine,
        session_id=f"bench-doc-{direction}",
        direction=direction,
        preset=preset,
        overrides=overrides,
        presets=presets,
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


@dataclass(frozen=True)
class Summary:
    direction: str
    dataset: str
    timing: str
    sentences: int
    bleu_simul: float
    bleu_offline: float
    chrf_simul: float
    chrf_offline: float
    laal_ideal_ms: float
    laal_ca_ms: float
    calls_per_utterance: float
    fast_path_share: float
    update_ms_mean: float
    offline_ms_mean: float
    #: Nearest-rank percentiles and the maximum over every update, finals included: each is one
    #: call of the reference client, which gives up after 15 s.
    update_ms_p50: float = float("nan")
    update_ms_p95: float = float("nan")
    update_ms_max: float = float("nan")
    #: Utterances with a copy redraft (see dragoman.streaming.copy_check), of `sentences`.
    copy_redrafts: int = 0
    #: Utterances with an engine call whose draft had a repetition loop cut.
    loop_cuts: int = 0
    #: BLEU of all lines joined into one segment (the issue's "scored as a whole document").
    doc_bleu_simul: float = float("nan")
    doc_bleu_offline: float = float("nan")

    @property
    def bleu_ratio(self) -> float:
        return self.bleu_simul / self.bleu_offline if self.bleu_offline > 0 else float("nan")


def summarize(direction: str, dataset: str, runs: Sequence[SentenceRun]) -> Summary:
    import sacrebleu

    target = direction.split("-")[1]
    tokenize = "zh" if target == "zh" else "13a"
    refs = [[r.sentence.reference for r in runs]]
    simul = [r.simul_text for r in runs]
    offline = [r.offline_text for r in runs]
    latencies = [
        lat
        for r in runs
        if (
            lat := sentence_laal(
                r.emissions, r.simul_text, r.sentence.reference, target, r.sentence.duration_ms
            )
        )
        is not None
    ]
    commits = sum(r.commits for r in runs)
    updates = [ms for r in runs for ms in r.update_ms]
    joiner = "" if target == "zh" else " "

    def doc_bleu(texts: Sequence[str]) -> float:
        document = joiner.join(t.strip() for t in texts)
        return sacrebleu.corpus_bleu([document], [[joiner.join(refs[0])]], tokenize=tokenize).score

    return Summary(
        direction=direction,
        dataset=dataset,
        timing=runs[0].sentence.timing if runs else "",
        sentences=len(runs),
        bleu_simul=sacrebleu.corpus_bleu(simul, refs, tokenize=tokenize).score,
        bleu_offline=sacrebleu.corpus_bleu(offline, refs, tokenize=tokenize).score,
        chrf_simul=sacrebleu.corpus_chrf(simul, refs).score,
        chrf_offline=sacrebleu.corpus_chrf(offline, refs).score,
        laal_ideal_ms=statistics.fmean(lat.ideal_ms for lat in latencies) if latencies else float("nan"),
        laal_ca_ms=statistics.fmean(lat.computation_aware_ms for lat in latencies)
        if latencies
        else float("nan"),
        calls_per_utterance=sum(r.engine_calls for r in runs) / max(1, len(runs)),
        fast_path_share=sum(r.fast_path_commits for r in runs) / commits if commits else 0.0,
        update_ms_mean=statistics.fmean(updates) if updates else 0.0,
        offline_ms_mean=statistics.fmean(r.offline_ms for r in runs) if runs else 0.0,
        update_ms_p50=percentile(updates, 50),
        update_ms_p95=percentile(updates, 95),
        update_ms_max=max(updates, default=float("nan")),
        copy_redrafts=sum(1 for r in runs if r.copy_redrafts),
        loop_cuts=sum(1 for r in runs if r.loop_cuts),
        doc_bleu_simul=doc_bleu(simul) if runs else float("nan"),
        doc_bleu_offline=doc_bleu(offline) if runs else float("nan"),
    )


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: a p95 that some update really took)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def markdown(summaries: Sequence[Summary], header: str) -> str:
    lines = [
        header,
        "",
        "| direction | data (timing) | sent. | BLEU simul | BLEU offline | ratio | chrF simul | chrF offline "
        "| LAAL ideal ms | LAAL CA ms | engine calls/utt | fast-path commits | ms/update | p50 | p95 | max "
        "| offline ms | copy redrafts | loop cuts | doc BLEU simul | doc BLEU offline |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.direction} | {s.dataset} ({s.timing}) | {s.sentences} | {s.bleu_simul:.1f} "
            f"| {s.bleu_offline:.1f} | {s.bleu_ratio:.2f} | {s.chrf_simul:.1f} | {s.chrf_offline:.1f} "
            f"| {s.laal_ideal_ms:.0f} | {s.laal_ca_ms:.0f} | {s.calls_per_utterance:.1f} "
            f"| {100 * s.fast_path_share:.0f}% | {s.update_ms_mean:.0f} | {s.update_ms_p50:.0f} "
            f"| {s.update_ms_p95:.0f} | {s.update_ms_max:.0f} | {s.offline_ms_mean:.0f} | {s.copy_redrafts} | {s.loop_cuts} "
            f"| {s.doc_bleu_simul:.1f} | {s.doc_bleu_offline:.1f} |"
        )
    return "\n".join(lines) + "\n"


def print_line(index: int, run: SentenceRun, *, target: str, count: int, verbose: bool) -> None:
    """Progress on stderr: a line's translations and latency (and its trace if `verbose`)."""
    sentence = run.sentence
    lat = sentence_laal(run.emissions, run.simul_text, sentence.reference, target, sentence.duration_ms)
    print(
        f"[{target} {index}/{count}] {sentence.id}: {run.engine_calls} calls, "
        f"{run.copy_redrafts} copy redrafts, {run.loop_cuts} loop cuts, "
        f"LAAL {lat.ideal_ms if lat else float('nan'):.0f}/"
        f"{lat.computation_aware_ms if lat else float('nan'):.0f} ms\n"
        f"    simul:   {run.simul_text}\n    offline: {run.offline_text}",
        file=sys.stderr,
        flush=True,
    )
    if verbose:
        print("\n".join("      " + line for line in run.trace), file=sys.stderr, flush=True)


def parse_overrides(items: Sequence[str]) -> dict[str, object]:
    """`KEY=VALUE` strings as init overrides; VALUE is read as JSON, else kept as text."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--override wants KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _compute(engine: MTEngine) -> str:
    info = engine.describe()
    return f"{info.compute_type} ({info.compute_reason})" if info.compute_reason else info.compute_type


def _engine(args: argparse.Namespace) -> tuple[MTEngine, str]:
    from dragoman.config import load_settings
    from dragoman.engines.registry import create_mt_engine

    overrides: dict[str, Any] = {
        "mt.backend": args.backend,
        "mt.preset": args.preset,
        "mt.compute_type": args.compute_type,
    }
    if args.model:
        overrides["mt.model"] = args.model
    if args.threads:
        overrides["mt.threads"] = args.threads
    if args.stale_budget is not None:
        overrides["mt.stale_budget"] = args.stale_budget
    settings = load_settings(**overrides)
    engine = create_mt_engine(settings.mt, settings.cache_dir)
    engine.warm_up()  # as the server does before it is ready
    return engine, settings.mt.preset


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mt_simul", description=__doc__.split("\n")[0])
    parser.add_argument("--direction", default="en-de", help="en-de, en-it, en-zh, or a comma list")
    parser.add_argument("--sentences", type=int, default=30)
    parser.add_argument("--data", choices=DATASETS, default="flores")
    parser.add_argument("--preset", default=None, help="session preset (default: the configured one)")
    parser.add_argument("--backend", default=None, help="MT backend (default: the configured one)")
    parser.add_argument("--model", default=None, help="model folder for backends that take one")
    parser.add_argument(
        "--compute-type", default=None, help="auto, int8, bfloat16 or float32 (default: the configured one)"
    )
    parser.add_argument("--tail-words", type=int, default=2, help="words the ASR holds back as its tail")
    parser.add_argument(
        "--pause-commit-ms", type=float, default=DEFAULT_PAUSE_COMMIT_MS, help="silence that commits the tail"
    )
    parser.add_argument("--words-per-second", type=float, default=DEFAULT_WORDS_PER_SECOND)
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client override sent in init, e.g. translation_alignatt_stop_at_frontier=true (repeatable)",
    )
    parser.add_argument("--threads", type=int, default=0, help="MT engine threads (default: the configured)")
    parser.add_argument(
        "--stale-budget",
        type=int,
        default=None,
        help="qwen-llama: source tokens inserted under kept cells before they are recomputed "
        "(default: the configured; 0: exact)",
    )
    parser.add_argument(
        "--no-copy-check",
        action="store_true",
        help="never redraft a draft that copies the source (to measure what the check does)",
    )
    parser.add_argument(
        "--document",
        action="store_true",
        help="stream a direction's lines as one talk through one session, with the preset's history",
    )
    parser.add_argument(
        "--line-gap-ms",
        type=float,
        default=DEFAULT_LINE_GAP_MS,
        help="--document: the speaker's pause between lines",
    )
    parser.add_argument("--verbose", action="store_true", help="print every update of every sentence")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = parser.parse_args(argv)
    configure_logs("info", "console")  # the engine's log lines go to stderr, not the table
    if args.no_copy_check:
        from dragoman.sessions.mt import utterance

        utterance.COPY_CHECK_WORDS = 0  # no utterance is ever short enough to be checked

    load_before = os.getloadavg()[0]
    load_started = time.perf_counter()
    engine, preset = _engine(args)
    print(f"engine {engine.name} loaded in {time.perf_counter() - load_started:.1f} s", file=sys.stderr)
    presets = policy_presets(engine.name, preset)
    client_overrides = parse_overrides(args.override)
    if preset not in presets:
        parser.error(f"unknown preset {preset!r}; known: {', '.join(sorted(presets))}")
    summaries = []
    try:
        for direction in [d.strip() for d in args.direction.split(",") if d.strip()]:
            sentences = load(args.data, direction, args.sentences, words_per_second=args.words_per_second)
            report = functools.partial(
                print_line, target=direction.split("-")[1], count=len(sentences), verbose=args.verbose
            )
            options: dict[str, Any] = {
                "tail_words": args.tail_words,
                "pause_commit_ms": args.pause_commit_ms,
                "overrides": client_overrides,
                "presets": presets,
            }
            if args.document:
                runs = run_document(
                    sentences,
                    engine,
                    direction=direction,
                    preset=preset,
                    line_gap_ms=args.line_gap_ms,
                    on_line=report,
                    **options,
                )
            else:
                runs = []
                for index, sentence in enumerate(sentences, 1):
                    runs.append(simulate(sentence, engine, direction=direction, preset=preset, **options))
                    report(index, runs[-1])
            summaries.append(summarize(direction, args.data, runs))
    finally:
        engine.close()
    header = (
        f"Simultaneous MT, engine {engine.name}, preset {preset}, ASR tail {args.tail_words} words "
        f"(committed after {args.pause_commit_ms:.0f} ms of silence); "
        f"constant rate {args.words_per_second} words/s where the data has no timings.\n"
        f"Policy: {presets[preset]}; client overrides: {client_overrides or 'none'}; "
        f"copy check {'off' if args.no_copy_check else 'on'}; "
        + (
            f"each direction one talk through one session, lines {args.line_gap_ms:.0f} ms apart\n"
            if args.document
            else "each line a fresh session\n"
        )
        + f"Engine compute: {_compute(engine)}. CPU: {cpu_info().describe()}.\n"
        f"Timing is wall clock on this machine; 1-minute load average "
        f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (above the CPU count, "
        "other processes inflated the engine times and the computation-aware LAAL)."
    )
    table = markdown(summaries, header)
    print(table)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")
    for summary in summaries:
        record_goal(summary, engine.name, preset, args.document)
    return 0


def record_goal(summary: Summary, model: str, preset: str, document: bool) -> None:
    """The goal's two figures (bench/results.py): BLEU ≥ 0.9 × offline at a CA-LAAL ≤ 2.5 s."""
    source, target = summary.direction.split("-")
    size = "1.5B" if "1.5b" in model else "0.5B" if "0.5b" in model else model
    goal = f"simultaneous MT {source}→{target} ({size}, {preset})"
    conditions = (
        f"BLEU {summary.bleu_simul:.1f} / {summary.bleu_offline:.1f}; {summary.sentences} lines of "
        f"{summary.dataset}" + (", as one talk" if document else "")
    )
    record(
        "mt_simul",
        goal,
        "BLEU simultaneous / offline",
        summary.bleu_ratio,
        "×",
        target="≥ 0.9×",
        met=summary.bleu_ratio >= 0.9,
        conditions=conditions,
    )
    record(
        "mt_simul",
        goal,
        "computation-aware LAAL",
        summary.laal_ca_ms,
        "ms",
        target="≤ 2500 ms",
        met=summary.laal_ca_ms <= 2500,
        conditions=conditions,
    )


if __name__ == "__main__":
    raise SystemExit(main())
