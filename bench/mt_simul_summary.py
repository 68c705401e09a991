"""What simultaneous-MT runs come to: BLEU, chrF, LAAL and update times per direction
(`summarize`), their markdown table, and the goal's two figures in bench/results."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.mt_metrics import sentence_laal
from bench.mt_simulation import SentenceRun
from bench.results import record


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
        update_ms_p50=nearest_rank_percentile(updates, 50),
        update_ms_p95=nearest_rank_percentile(updates, 95),
        update_ms_max=max(updates, default=float("nan")),
        copy_redrafts=sum(1 for r in runs if r.copy_redrafts),
        loop_cuts=sum(1 for r in runs if r.loop_cuts),
        doc_bleu_simul=doc_bleu(simul) if runs else float("nan"),
        doc_bleu_offline=doc_bleu(offline) if runs else float("nan"),
    )


def nearest_rank_percentile(values: Sequence[float], q: float) -> float:
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


def record_goal(summary: Summary, model: str, preset: str, document: bool, *, streamed: bool = False) -> None:
    """The goal's two figures (bench/results.py): BLEU ≥ 0.9 × offline at a CA-LAAL ≤ 2.5 s.
    Commits streamed pass by pass (the interpreter's MT) are a goal row of their own."""
    source, target = summary.direction.split("-")
    size = "1.5B" if "1.5b" in model else "0.5B" if "0.5b" in model else model
    goal = f"simultaneous MT {source}→{target} ({size}, {preset}" + (
        ", commits streamed)" if streamed else ")"
    )
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
