"""`dragoman mt calibrate`: alignment heads of a model for a direction, from parallel text files.

The scoring and selection are `dragoman.engines.mt.head_selection`; this reads
the data (TSV files, by default the newstest and Tatoeba excerpts of the eval set,
`tools/eval_set.py`), loads the model and reports.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.config import Settings
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.head_selection import (
    DEFAULT_SENTENCES,
    DEFAULT_TOP_K,
    CalibrationResult,
    Progress,
    calibrate,
    usable_pairs,
)
from dragoman.engines.mt.presets import DEFAULT_MODEL
from dragoman.errors import ConfigError
from dragoman.tools.eval_set import eval_dir

if TYPE_CHECKING:
    from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine

#: FLORES-200 column names of the eval set's 4-way file.
FLORES_COLUMNS = {"en": "eng_Latn", "de": "deu_Latn", "it": "ita_Latn", "zh": "zho_Hans"}

#: Calibration data per direction, relative to the eval set's `mt` folder. The
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
# The reverse directions read the same files the other way round (`read_pairs`).
DEFAULT_DATA.update({f"{d[3:]}-{d[:2]}": files for d, files in list(DEFAULT_DATA.items())})

#: ISO 639-3 codes in the excerpts' names (`newstest2020.eng-deu.…`): which column is which.
_FILE_LANGS = {"eng": "en", "deu": "de", "ita": "it", "zho": "zh"}
_FILE_PAIR = re.compile(r"\.([a-z]{3})-([a-z]{3})\.")


def default_eval_dir() -> Path:
    """The eval set's parallel text (`DRAGOMAN_EVAL_DIR`, or beside a source checkout);
    a `ConfigError` that says what to pass where there is none, as in an installed wheel."""
    try:
        return eval_dir() / "mt"
    except ConfigError as exc:
        raise ConfigError(f"no calibration data given (--data) and {exc}") from None


# -- data ----------------------------------------------------------------------------------


def read_pairs(path: Path, direction: str) -> list[tuple[str, str]]:
    """(source, target) pairs of a TSV: two columns, or a FLORES file with a header row
    naming `eng_Latn`, `deu_Latn`, ... columns. Two columns are source then target, unless
    the file's name says the direction's reverse (`….eng-deu.….tsv` read for de-en)."""
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
        named = _FILE_PAIR.search(path.name)
        langs = tuple(_FILE_LANGS.get(code) for code in named.groups()) if named else ()
        s, t = (1, 0) if langs == (target_lang, source_lang) else (0, 1)
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


# -- the run -------------------------------------------------------------------------------


def calibrate_model(
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
    `DEFAULT_DATA` in the eval set. `out` defaults to
    `<cache_dir>/heads/<model>/<direction>.json`, which the engine searches before
    the packaged files. The model is loaded only once the data proved usable.
    """
    try:
        from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine
        from dragoman.engines.torch_lm.files import prepare_model
    except ImportError as exc:
        raise ConfigError("calibration runs the model in PyTorch: pip install 'dragoman[torch]'") from exc

    mt_heads.split_direction(direction)
    if sentences < 2:
        raise ConfigError("calibration needs at least 2 sentences")
    files = list(data) if data else default_data(direction)
    pairs = usable_pairs(
        direction,
        _interleave([read_pairs(Path(f), direction) for f in files]),
        origin=", ".join(map(str, files)),
    )
    if engine is None:
        model_dir, model_id, sha = prepare_model(model, cache_dir)
        engine = QwenTorchMTEngine(model_dir, model_id=model_id, model_sha256=sha)
    path = out or Path(cache_dir).expanduser() / "heads" / engine.name / f"{direction}.json"
    return calibrate(
        engine,
        direction,
        pairs,
        out=path,
        sentences=sentences,
        top_k=top_k,
        data_names=[Path(f).name for f in files],
        progress=progress,
    )


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

    result = calibrate_model(
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
