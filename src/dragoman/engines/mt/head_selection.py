"""Choose a model's alignment heads for a direction from parallel text, without gold alignments.

Each (source, reference) pair is run teacher-forced through the engine's own
prompt (`QwenTorchMTEngine.teacher_forced_attention`), giving every head's
attention from each target token to the source words. Heads are scored by:

* **anchors** (`engines.mt.anchors`): alignments that can be trusted without an aligner,
  i.e. strings shared verbatim by source and reference (numbers, names, longer
  identical words) and the sentence-final mark. A head scores when its argmax
  over the source words for the anchor's target token is the anchor's source
  word (`anchor_hit`), and by the share of its source attention on that word
  (`anchor_mass`);
* **monotonicity**: the correlation between a target token's position and the
  source word it attends to (argmax), per sentence. A head that stares at one
  word scores 0, not 1.

score = c (0.85 anchor_hit + 0.15 anchor_mass) + (1 - c) max(monotonicity, 0),
with c = anchors / (anchors + 40): anchors are exact but sparse (en-zh shares
few strings), monotonicity is dense but only a prior (German verbs move to the
end), so the fewer anchors the more the prior counts. The weights are a
judgement. The top-k heads are written to a heads file (`engines.mt.heads`).

The command line, with its default data, is `dragoman.tools.calibrate`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dragoman.engines.asr.word_agreement import split_words
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.anchors import find_anchors
from dragoman.errors import ConfigError
from dragoman.languages import is_unsegmented

#: progress(done, total, message)
Progress = Callable[[int, int, str], None]

#: Within the anchor term: argmax on the anchor word vs share of attention on it.
HIT_WEIGHT = 0.85
MASS_WEIGHT = 0.15
#: Anchors at which the anchor term and the monotonicity prior weigh the same.
ANCHOR_PRIOR = 40
#: Sentences read at most, per sentence wanted, while looking for ones with anchors.
READ_FACTOR = 3
DEFAULT_TOP_K = 4
DEFAULT_SENTENCES = 50
#: Share of the chosen sentences kept out of the selection to measure the chosen heads.
HELD_OUT_SHARE = 0.2


class TeacherForcing(Protocol):
    """An engine that reports every head's attention for a given translation."""

    name: str
    model_sha256: str | None

    def teacher_forced_attention(
        self, source_lang: str, target_lang: str, source_words: Sequence[str], target_text: str
    ) -> tuple[npt.NDArray[np.float32], list[int], list[tuple[int, int]]]: ...


# -- sentences -----------------------------------------------------------------------------


def _unsegmented(lang: str) -> bool:
    return is_unsegmented(lang)


def source_words(text: str, lang: str) -> list[str]:
    """The source as the engine gets it from a streaming ASR: words between spaces, and in a
    script without spaces (Chinese) one character a word, as the speech front cuts them
    (`split_words`), so the heads are chosen on the prompts they will see."""
    if not _unsegmented(lang):
        return text.split()
    return [word.strip() for word in split_words(text) if word.strip()]


def _plausible(source: str, target: str, source_lang: str, target_lang: str) -> bool:
    """Skip very short or long sentences and pairs whose lengths disagree (cut-off lines)."""
    n_words = len(source_words(source, source_lang))
    # A Chinese character is about half an English word.
    most = 80 if _unsegmented(source_lang) else 40
    if not 4 <= n_words <= most:
        return False
    ratio = len(target) / len(source)
    if _unsegmented(target_lang):
        return 0.1 <= ratio <= 1.0
    if _unsegmented(source_lang):
        return 1.0 <= ratio <= 10.0
    return 0.5 <= ratio <= 2.0


def usable_pairs(
    direction: str, pairs: Iterable[tuple[str, str]], origin: str = "the data"
) -> list[tuple[str, str]]:
    """The plausible pairs, without repeats, in order; a ConfigError when fewer than two."""
    source_lang, target_lang = mt_heads.split_direction(direction)
    usable = list(dict.fromkeys(p for p in pairs if _plausible(p[0], p[1], source_lang, target_lang)))
    if len(usable) < 2:
        raise ConfigError(f"too little usable parallel text in {origin}")
    return usable


# -- scoring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    #: [layers, heads, target tokens, source words]: raw attention summed per word.
    attention: npt.NDArray[np.float32]
    #: (target token, source word) pairs trusted to align.
    anchors: Sequence[tuple[int, int]]


@dataclass(frozen=True)
class HeadScores:
    """Per-head statistics, each [layers, heads]."""

    anchor_hit: npt.NDArray[np.float64]
    anchor_mass: npt.NDArray[np.float64]
    monotonicity: npt.NDArray[np.float64]
    #: Mean share of a row's attention that lands on the source words (for the record).
    source_mass: npt.NDArray[np.float64]
    score: npt.NDArray[np.float64]
    n_anchors: int
    n_sentences: int


def _correlation(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Pearson correlation of x [T] with each row of y [..., T]; 0 where y is constant."""
    xc = x - x.mean()
    yc = y - y.mean(axis=-1, keepdims=True)
    denom = np.sqrt((xc**2).sum()) * np.sqrt((yc**2).sum(axis=-1))
    num = (yc * xc).sum(axis=-1)
    out: npt.NDArray[np.float64] = np.divide(num, denom, out=np.zeros_like(num), where=denom > 1e-12)
    return out


def score_heads(samples: Sequence[Sample]) -> HeadScores:
    if not samples:
        raise ValueError("no calibration samples")
    shape = samples[0].attention.shape[:2]
    hit = np.zeros(shape)
    mass = np.zeros(shape)
    mono = np.zeros(shape)
    source_mass = np.zeros(shape)
    n_anchors = 0
    mono_weight = 0.0
    rows = 0
    for sample in samples:
        att = np.asarray(sample.attention, dtype=np.float64)
        if att.shape[:2] != shape:
            raise ValueError(f"attention shape {att.shape} does not match {shape}")
        n_target, n_source = att.shape[2], att.shape[3]
        if n_target == 0 or n_source == 0:
            continue
        total = att.sum(axis=-1)
        source_mass += total.sum(axis=-1)
        rows += n_target
        best = att.argmax(axis=-1)
        share = att / np.maximum(total, 1e-12)[..., None]
        for token, word in sample.anchors:
            if 0 <= token < n_target and 0 <= word < n_source:
                hit += best[:, :, token] == word
                mass += share[:, :, token, word]
                n_anchors += 1
        if n_target >= 3 and n_source >= 2:
            weight = float(n_target)
            mono += weight * _correlation(np.arange(n_target, dtype=np.float64), best.astype(np.float64))
            mono_weight += weight
    if n_anchors:
        hit /= n_anchors
        mass /= n_anchors
    if mono_weight:
        mono /= mono_weight
    if rows:
        source_mass /= rows
    # The fewer anchors, the noisier their rates: lean on the prior instead.
    confidence = n_anchors / (n_anchors + ANCHOR_PRIOR)
    score = confidence * (HIT_WEIGHT * hit + MASS_WEIGHT * mass) + (1.0 - confidence) * np.clip(
        mono, 0.0, None
    )
    return HeadScores(hit, mass, mono, source_mass, score, n_anchors, len(samples))


def select_heads(scores: HeadScores, top_k: int) -> list[mt_heads.Head]:
    """The `top_k` best heads, best first (ties: lower layer, then lower head)."""
    if top_k < 1:
        raise ValueError("top_k must be at least 1")
    flat = scores.score.ravel()
    order = sorted(range(flat.size), key=lambda i: (-flat[i], i))[:top_k]
    n_heads = scores.score.shape[1]
    heads = []
    for index in order:
        layer, head = divmod(index, n_heads)
        details = {
            "anchor_hit": float(scores.anchor_hit[layer, head]),
            "anchor_mass": float(scores.anchor_mass[layer, head]),
            "monotonicity": float(scores.monotonicity[layer, head]),
            "source_mass": float(scores.source_mass[layer, head]),
        }
        heads.append(
            mt_heads.Head(layer, head, float(flat[index]), {k: round(v, 4) for k, v in details.items()})
        )
    return heads


def combined_attention(
    attention: npt.NDArray[np.float32], heads: Sequence[tuple[int, int]]
) -> npt.NDArray[np.float32]:
    """What the engine reports: the heads' rows, each normalised over the source words, averaged."""
    rows = np.stack([attention[layer, head] for layer, head in heads]).astype(np.float64)
    rows = rows / np.maximum(rows.sum(axis=-1, keepdims=True), 1e-12)
    return np.asarray(rows.mean(axis=0), dtype=np.float32)


def anchor_accuracy(samples: Sequence[Sample], heads: Sequence[tuple[int, int]]) -> tuple[float, int]:
    """Share of anchors whose combined-attention argmax is the anchor's source word, and the count."""
    hits = total = 0
    for sample in samples:
        combined = combined_attention(sample.attention, heads)
        for token, word in sample.anchors:
            if 0 <= token < combined.shape[0]:
                hits += int(combined[token].argmax() == word)
                total += 1
    return (hits / total if total else 0.0), total


# -- the run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationResult:
    heads_file: mt_heads.HeadsFile
    path: Path
    scores: HeadScores
    #: Anchor accuracy of the chosen heads together on the held-out sentences, and their anchors.
    held_out_accuracy: float
    held_out_anchors: int


def calibrate(
    engine: TeacherForcing,
    direction: str,
    pairs: Sequence[tuple[str, str]],
    *,
    out: Path,
    sentences: int = DEFAULT_SENTENCES,
    top_k: int = DEFAULT_TOP_K,
    data_names: Sequence[str] = (),
    progress: Progress | None = None,
) -> CalibrationResult:
    """Select `top_k` alignment heads of `engine` for `direction` and write a heads file to `out`.

    `pairs`: (source, reference) pairs, `usable_pairs`' output. The first
    `sentences` of them are taken (those with anchors first); a fifth of those is
    held out to measure the chosen heads. `data_names` go into the file's record.
    """
    source_lang, target_lang = mt_heads.split_direction(direction)
    if sentences < 2:
        raise ConfigError("calibration needs at least 2 sentences")
    report = progress or (lambda done, total, message: None)

    with_anchors: list[Sample] = []
    without: list[Sample] = []
    for examined, (source, target) in enumerate(pairs[: READ_FACTOR * sentences], start=1):
        if len(with_anchors) >= sentences:
            break
        words = source_words(source, source_lang)
        attention, _ids, spans = engine.teacher_forced_attention(source_lang, target_lang, words, target)
        sample = Sample(attention, find_anchors(words, target, spans))
        (with_anchors if sample.anchors else without).append(sample)
        report(len(with_anchors), sentences, f"{examined} sentences read, {len(with_anchors)} with anchors")
    chosen = (with_anchors + without)[:sentences]
    # Every fifth sentence is held out, so both parts mix the data files alike.
    stride = max(2, round(1 / HELD_OUT_SHARE))
    fit = [x for i, x in enumerate(chosen) if i % stride != stride - 1]
    check = [x for i, x in enumerate(chosen) if i % stride == stride - 1]
    scores = score_heads(fit)
    heads = select_heads(scores, top_k)
    accuracy, checked = anchor_accuracy(check, [(h.layer, h.head) for h in heads])
    heads_file = mt_heads.HeadsFile(
        model=engine.name,
        direction=direction,
        heads=tuple(heads),
        model_sha256=engine.model_sha256,
        calibration={
            "method": "shared-string and sentence-end anchors + monotonicity prior, teacher-forced",
            "score": f"c*({HIT_WEIGHT}*anchor_hit + {MASS_WEIGHT}*anchor_mass) + (1-c)*max(monotonicity, 0), "
            f"c = anchors/(anchors+{ANCHOR_PRIOR})",
            "prompt_version": _prompt_version(),
            "data": list(data_names),
            "sentences": len(fit),
            "anchors": scores.n_anchors,
            "held_out_sentences": len(check),
            "held_out_anchor_accuracy": round(accuracy, 4),
            "top_k": top_k,
            "date": dt.date.today().isoformat(),
        },
    )
    mt_heads.save(heads_file, out)
    return CalibrationResult(heads_file, out, scores, accuracy, checked)


def _prompt_version() -> int:
    from dragoman.engines.mt.qwen_prompt import PROMPT_VERSION

    return PROMPT_VERSION
