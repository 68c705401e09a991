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
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dragoman.config import Settings
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.anchors import find_anchors
from dragoman.engines.mt.presets import DEFAULT_MODEL
from dragoman.errors import ConfigError

if TYPE_CHECKING:
    from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine

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


#: FLORES-200 column names of the 4-way file in ../shared/eval/mt.
FLORES_COLUMNS = {"en": "eng_Latn", "de": "deu_Latn", "it": "ita_Latn", "zh": "zho_Hans"}

#: Calibration data per direction, relative to the eval folder (../shared/eval/mt). The
#: benchmark uses FLORES (first 100) and the IWSLT dev set (evaluation only), so these
#: are newstest2020 and Tatoeba excerpts, which neither contains. en-it has no newstest.
DEFAULT_DATA: dict[str, tuple[str, ...]] = {
    "en-de": (
        "excerpts/newstest2020.eng-deu.first100.tsv",
        "excerpts/tatoeba-test-v2021-08-07.eng-deu.first200.tsv",
    ),
    "en-it": ("excerpts/tatoeba-test-v2021-08-07.eng-ita.first200.tsv",),
    "en-zh": (
        "excerpts/newstest2020.eng-zho.first100.tsv",
        "excerpts/tatoeba-test-v2021-08-07.eng-zho.first200.tsv",
    ),
}


def default_eval_dir() -> Path:
    """`<repo>/../shared/eval/mt`, where a source checkout finds the shared parallel text."""
    return Path(__file__).resolve().parents[3] / ".." / "shared" / "eval" / "mt"


# -- data ----------------------------------------------------------------------------------


def read_pairs(path: Path, direction: str) -> list[tuple[str, str]]:
    """(source, target) pairs of a TSV: two columns, or a FLORES file with a header row
    naming `eng_Latn`, `deu_Latn`, ... columns."""
    source_lang, target_lang = mt_heads.split_direction(direction)
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    except OSError as exc:
        raise ConfigError(f"cannot read calibration data {path}: {exc}") from exc
    if not rows:
        return []
    header = rows[0]
    src_col, tgt_col = FLORES_COLUMNS.get(source_lang), FLORES_COLUMNS.get(target_lang)
    if src_col in header and tgt_col in header:
        s, t = header.index(str(src_col)), header.index(str(tgt_col))
        body = rows[1:]
    else:
        s, t = 0, 1
        body = rows
    return [
        (r[s].strip(), r[t].strip()) for r in body if len(r) > max(s, t) and r[s].strip() and r[t].strip()
    ]


def default_data(direction: str, eval_dir: Path | None = None) -> list[Path]:
    names = DEFAULT_DATA.get(direction)
    if names is None:
        raise ConfigError(
            f"no default calibration data for {direction}; pass a TSV of source<TAB>target lines"
        )
    root = eval_dir or default_eval_dir()
    return [root / name for name in names]


def _interleave(lists: Sequence[Sequence[tuple[str, str]]]) -> Iterator[tuple[str, str]]:
    """Round-robin over the files, so a few sentences of each kind come first."""
    longest = max((len(x) for x in lists), default=0)
    for i in range(longest):
        for items in lists:
            if i < len(items):
                yield items[i]


def _plausible(source: str, target: str, target_lang: str) -> bool:
    """Skip very short or long sentences and pairs whose lengths disagree (cut-off lines)."""
    n_words = len(source.split())
    if not 4 <= n_words <= 40:
        return False
    if target_lang in ("zh", "ja"):
        return 0.1 <= len(target) / len(source) <= 1.0
    return 0.5 <= len(target) / len(source) <= 2.0


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
    direction: str,
    *,
    cache_dir: Path,
    model: str = DEFAULT_MODEL,
    data: Sequence[Path] | None = None,
    sentences: int = DEFAULT_SENTENCES,
    top_k: int = DEFAULT_TOP_K,
    out: Path | None = None,
    progress: Progress | None = None,
    engine: QwenTorchMTEngine | None = None,
) -> CalibrationResult:
    """Select `top_k` alignment heads of `model` for `direction` and write a heads file.

    `data`: TSV files (source<TAB>target, or FLORES 4-way with a header); default:
    `DEFAULT_DATA` under ../shared/eval/mt. The first `sentences` usable pairs are
    taken (those with anchors first); a fifth of them is held out to measure the
    chosen heads. `out` defaults to `<cache_dir>/heads/<model>/<direction>.json`,
    which the engine searches before the packaged files.
    """
    from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine
    from dragoman.engines.torch_lm.files import prepare_model

    source_lang, target_lang = mt_heads.split_direction(direction)
    if sentences < 2:
        raise ConfigError("calibration needs at least 2 sentences")
    files = list(data) if data else default_data(direction)
    pairs = [
        p
        for p in _interleave([read_pairs(Path(f), direction) for f in files])
        if _plausible(p[0], p[1], target_lang)
    ]
    pairs = list(dict.fromkeys(pairs))
    if len(pairs) < 2:
        raise ConfigError(f"too little usable parallel text in {', '.join(map(str, files))}")
    if engine is None:
        model_dir, model_id, sha = prepare_model(model, cache_dir)
        engine = QwenTorchMTEngine(model_dir, model_id=model_id, model_sha256=sha)
    report = progress or (lambda done, total, message: None)

    with_anchors: list[Sample] = []
    without: list[Sample] = []
    for examined, (source, target) in enumerate(pairs[: READ_FACTOR * sentences], start=1):
        if len(with_anchors) >= sentences:
            break
        words = source.split()
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
            "data": [Path(f).name for f in files],
            "sentences": len(fit),
            "anchors": scores.n_anchors,
            "held_out_sentences": len(check),
            "held_out_anchor_accuracy": round(accuracy, 4),
            "top_k": top_k,
            "date": dt.date.today().isoformat(),
        },
    )
    path = out or Path(cache_dir).expanduser() / "heads" / engine.name / f"{direction}.json"
    mt_heads.save(heads_file, path)
    return CalibrationResult(heads_file, path, scores, accuracy, checked)


def _prompt_version() -> int:
    from dragoman.engines.mt.qwen_prompt import PROMPT_VERSION

    return PROMPT_VERSION


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    """`dragoman mt calibrate`: reads --direction, --model, --data, --sentences, --top-k, --out.

    Without --out the file goes to `mt.heads_dir` when set, else to
    `<cache_dir>/heads`; the engine searches both before the packaged files.
    """
    model = getattr(args, "model", None) or DEFAULT_MODEL
    data = getattr(args, "data", None)
    out = getattr(args, "out", None)
    if out is None and settings.mt.heads_dir is not None:
        from dragoman.engines.torch_lm.files import model_id_for

        out = Path(settings.mt.heads_dir).expanduser() / model_id_for(model) / f"{args.direction}.json"

    def progress(done: int, total: int, message: str) -> None:
        print(f"  {done}/{total}: {message}", end="\r", file=sys.stderr, flush=True)

    result = calibrate(
        args.direction,
        cache_dir=settings.cache_dir,
        model=model,
        data=[Path(path) for path in data] if data else None,
        sentences=int(getattr(args, "sentences", DEFAULT_SENTENCES)),
        top_k=int(getattr(args, "top_k", DEFAULT_TOP_K)),
        out=out,
        progress=progress,
    )
    print(file=sys.stderr)
    info = result.heads_file.calibration
    print(
        f"{result.heads_file.model} {result.heads_file.direction}: {info['sentences']} sentences, "
        f"{info['anchors']} anchors; held-out anchor accuracy {result.held_out_accuracy:.2f} "
        f"({result.held_out_anchors} anchors)"
    )
    for head in result.heads_file.heads:
        print(f"  layer {head.layer:2d} head {head.head:2d}  score {head.score:.3f}  {dict(head.details)}")
    print(f"wrote {result.path}")
    return 0
