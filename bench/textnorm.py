"""Kept only for benchmarks not yet moved to `dragoman.tools.wer`, which tests and benchmarks
share: one normalisation, one WER (this module no longer has its own)."""

from __future__ import annotations

from dragoman.tools.wer import normalize, wer

__all__ = ["normalize", "wer"]
