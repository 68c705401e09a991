"""How much prompt each utterance's first update recomputes, as the translation history grows.

    python -m bench.mt_history_reuse [--sentences 8] [--preset fast] [--direction en-de]

One MT session over consecutive FLORES sentences (one utterance each: a partial update
with the first words, then the final), on the real engine. For the first update of each
utterance it prints the prompt tokens, how many the KV cache served and how many were
computed, with the history window of `sessions.mt.utterance.history_window` (grows from
`history_pairs` to twice that, so the previous prompt stays a prefix) against the plain
sliding window of the last `history_pairs` pairs; and the tokens the session's PREFILL
computed in the pause before it (`sessions/mt/session.py`): most where the window fell back.
Token counts do not depend on the machine's load; the milliseconds do.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Sequence

from bench.mt_data import load
from dragoman.config import load_settings
from dragoman.engines.mt.base import MTDraft, MTEngine
from dragoman.engines.registry import create_mt_engine
from dragoman.logs import configure as configure_logs
from dragoman.sessions.mt import requests as requests_module
from dragoman.sessions.mt.events import Init, JobKind, Translation, Update, Word
from dragoman.sessions.mt.session import MTSession
from dragoman.sessions.mt.utterance import history_window
from dragoman.streaming.alignatt_presets import policy_presets


def _sliding(total: int, pairs: int) -> int:
    return min(total, pairs)


def run(
    engine: MTEngine,
    preset: str,
    direction: str,
    sentences: int,
    window: Callable[[int, int], int],
    *,
    data: str = "flores",
    pairs: int | None = None,
    finals: list[str] | None = None,
) -> list[MTDraft]:
    """The first-update draft of each utterance, under `window`; each final text into `finals`."""
    requests_module.history_window = window  # type: ignore[attr-defined, assignment]  # the policy under test
    source_lang, target_lang = direction.split("-")
    presets = policy_presets(engine.name, preset)
    session = MTSession(
        session_id=f"history-{window.__name__}",
        engine_name=engine.name,
        directions=engine.directions(),
        decode=engine.decode,
        default_preset=preset,
        max_utterance_words=10_000,
        presets=presets,
    )
    overrides = {} if pairs is None else {"translation_history_pairs": pairs}
    session.receive(Init(1, source_lang, target_lang, preset=preset, overrides=overrides))
    session.events_to_send()
    firsts: list[MTDraft] = []
    prefilled = 0  # tokens the PREFILL in the pause before the next utterance computed
    seq = 0
    offset = 0.0  # the stream clock runs on across utterances
    for utterance, sentence in enumerate(load(data, direction, sentences)):
        words = [Word(w.text, offset + w.start_ms, offset + w.end_ms) for w in sentence.words]
        offset = (words[-1].end_ms or offset) + 1000.0
        for is_final, shown in ((False, words[:3]), (True, words)):
            seq += 1
            clock = (shown[-1].end_ms or 0.0) + 1.0
            session.receive(Update(seq, utterance, tuple(shown), (), clock, is_final))
            while (job := session.next_job()) is not None:
                draft = engine.draft(job.request)
                if job.kind is JobKind.PREFILL:
                    prefilled = draft.computed_tokens
                elif not is_final and len(firsts) == utterance:
                    draft.extra["prefilled_tokens"] = float(prefilled)
                    prefilled = 0
                    firsts.append(draft)
                session.job_done(job, draft)
            for event in session.events_to_send():
                if not isinstance(event, Translation):
                    raise RuntimeError(f"the session answered {event}")
                if event.final and finals is not None:
                    finals.append(event.committed_text)
    engine.forget(session.session_id)
    return firsts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.mt_history_reuse", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--preset", default="fast")
    parser.add_argument("--direction", default="en-de")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--bleu",
        default=None,
        metavar="DATA",
        help="instead: corpus BLEU of the streamed finals over DATA (mcif: the IWSLT dev talks, in order) "
        "for each of --pairs",
    )
    parser.add_argument("--pairs", default="0,1,2", help="--bleu: the history_pairs values to compare")
    args = parser.parse_args(argv)
    configure_logs("warning", "console")
    settings = load_settings(
        **{"mt.backend": "qwen-llama", "mt.preset": args.preset, "mt.threads": args.threads}
    )
    engine = create_mt_engine(settings.mt, settings.cache_dir)
    engine.warm_up()
    if args.bleu:
        try:
            return _bleu(engine, args)
        finally:
            engine.close()
    print(
        f"{engine.name}, preset {args.preset}, {args.direction}, {args.sentences} FLORES sentences in one session; "
        f"1-minute load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.\n"
    )
    print("| window | utterance | prompt tokens | cached | computed | ms | prefilled before |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    totals = {}
    try:
        for window in (history_window, _sliding):
            firsts = run(engine, args.preset, args.direction, args.sentences, window)
            computed = []
            for index, draft in enumerate(firsts):
                extra = draft.extra
                prompt, cached = extra.get("prompt_tokens", 0.0), extra.get("cached_tokens", 0.0)
                computed.append(prompt - cached)
                print(
                    f"| {window.__name__} | {index} | {prompt:.0f} | {cached:.0f} | {prompt - cached:.0f} "
                    f"| {extra.get('engine_ms', 0.0):.0f} | {extra.get('prefilled_tokens', 0.0):.0f} |"
                )
            totals[window.__name__] = computed
    finally:
        engine.close()
    print()
    for name, computed in totals.items():
        print(
            f"{name}: computed tokens per first update mean {statistics.fmean(computed):.1f}, max {max(computed):.0f}"
        )
    return 0


def _bleu(engine: MTEngine, args: argparse.Namespace) -> int:
    import sacrebleu

    target = args.direction.split("-")[1]
    references = [s.reference for s in load(args.bleu, args.direction, args.sentences)]
    print(
        f"{engine.name}, preset {args.preset}, {args.direction}, the first {len(references)} {args.bleu} "
        f"segments streamed in one session (a partial of 3 words, then the final, per segment); "
        f"1-minute load average {os.getloadavg()[0]:.1f}.\n"
    )
    print("| history pairs | BLEU | chrF |")
    print("|---:|---:|---:|")
    for pairs in [int(p) for p in args.pairs.split(",")]:
        finals: list[str] = []
        run(
            engine,
            args.preset,
            args.direction,
            args.sentences,
            history_window,
            data=args.bleu,
            pairs=pairs,
            finals=finals,
        )
        tokenize = "zh" if target == "zh" else "13a"
        bleu = sacrebleu.corpus_bleu(finals, [references], tokenize=tokenize).score
        chrf = sacrebleu.corpus_chrf(finals, [references]).score
        print(f"| {pairs} | {bleu:.1f} | {chrf:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
