"""Do the llama.cpp and torch MT engines' alignment heads point at the same source words?

    python -m bench.mt_attention_agreement --direction en-de --sentences 40 [--model NAME]

Teacher-forced on the calibration data (`dragoman.tools.calibrate`'s default files,
the sentences calibration used first), both engines report every head's attention
from each reference token to the source words. Combined over the calibrated heads
(`head_selection.combined_attention`, what a draft reports), this prints:

- **argmax agreement**: the share of target tokens whose most-attended source word is
  the same in both engines, over all tokens and over the anchor tokens only;
- **anchor accuracy** of each engine: the share of anchors (`engines.mt.anchors`)
  whose argmax is the anchor's word; the calibration's own quality measure.

The torch engine runs float32 on the dequantised GGUF (the reference); llama.cpp runs
the Q4_K_M GGUF itself, so the two differ by the quantisation of the activations and
the order of float operations, not by the weights.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dragoman.config import load_settings
from dragoman.cpu import cpu_info
from dragoman.engines.mt import heads as mt_heads
from dragoman.engines.mt.anchors import find_anchors
from dragoman.engines.mt.head_selection import TeacherForcing, combined_attention, usable_pairs
from dragoman.engines.mt.presets import DEFAULT_MODEL
from dragoman.tools.calibrate import _interleave, default_data, read_pairs


@dataclass
class Agreement:
    tokens: int = 0
    same: int = 0
    anchors: int = 0
    anchor_same: int = 0
    torch_hits: int = 0
    llama_hits: int = 0
    sentences: int = 0

    def line(self, label: str) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100 * a / b:.1f}%" if b else "n/a"

        return (
            f"| {label} | {self.sentences} | {self.tokens} | {pct(self.same, self.tokens)} | {self.anchors} "
            f"| {pct(self.anchor_same, self.anchors)} | {pct(self.torch_hits, self.anchors)} "
            f"| {pct(self.llama_hits, self.anchors)} |"
        )


def compare(
    torch_engine: TeacherForcing,
    llama_engine: TeacherForcing,
    direction: str,
    pairs: Sequence[tuple[str, str]],
    heads: Sequence[tuple[int, int]],
) -> Agreement:
    source_lang, target_lang = direction.split("-")
    result = Agreement()
    for source, target in pairs:
        words = source.split()
        a, ids_a, spans = torch_engine.teacher_forced_attention(source_lang, target_lang, words, target)
        b, ids_b, _spans = llama_engine.teacher_forced_attention(source_lang, target_lang, words, target)
        if ids_a != ids_b:
            print(f"token ids differ, skipped: {source[:60]}", file=sys.stderr)
            continue
        peak_a = combined_attention(a, heads).argmax(axis=1)
        peak_b = combined_attention(b, heads).argmax(axis=1)
        result.sentences += 1
        result.tokens += len(peak_a)
        result.same += int((peak_a == peak_b).sum())
        for token, word in find_anchors(words, target, spans):
            result.anchors += 1
            result.anchor_same += int(peak_a[token] == peak_b[token])
            result.torch_hits += int(peak_a[token] == word)
            result.llama_hits += int(peak_b[token] == word)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mt_attention_agreement")
    parser.add_argument("--direction", default="en-de", help="a comma list of directions")
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from dragoman.engines.mt.qwen_llama import QwenLlamaMTEngine
    from dragoman.engines.mt.qwen_llama import create as create_llama
    from dragoman.engines.mt.qwen_torch import QwenTorchMTEngine
    from dragoman.engines.mt.qwen_torch import create as create_torch

    settings = load_settings(**{"mt.model": args.model})
    torch_engine = create_torch(
        settings.mt.model_copy(update={"compute_type": "float32"}), settings.cache_dir
    )
    llama_engine = create_llama(settings.mt, settings.cache_dir)
    assert isinstance(torch_engine, QwenTorchMTEngine) and isinstance(llama_engine, QwenLlamaMTEngine)
    lines = [
        f"Alignment-head argmax, llama.cpp (Q4_K_M GGUF) vs torch (float32, dequantised), {args.model}, "
        f"teacher-forced on the calibration data. CPU: {cpu_info().describe()}.",
        "",
        "| direction | sentences | target tokens | argmax agrees | anchors | agrees on anchors "
        "| anchor accuracy torch | anchor accuracy llama.cpp |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for direction in [d.strip() for d in args.direction.split(",") if d.strip()]:
        found = mt_heads.find(llama_engine.name, direction, mt_heads.search_dirs(None, settings.cache_dir))
        if found is None:
            raise SystemExit(f"no heads file for {llama_engine.name} {direction}")
        files = default_data(direction)
        pairs = usable_pairs(direction, _interleave([read_pairs(f, direction) for f in files]))
        started = time.perf_counter()
        result = compare(torch_engine, llama_engine, direction, pairs[: args.sentences], found.pairs())
        print(f"{direction}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        lines.append(result.line(direction))
    torch_engine.close()
    llama_engine.close()
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
