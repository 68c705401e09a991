"""bench/README.md names every benchmark a user can run."""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]


def test_every_runnable_benchmark_is_listed() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    runnable = sorted(
        path.stem
        for path in BENCH.glob("*.py")
        if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8")
    )
    assert len(runnable) > 20
    assert [name for name in runnable if f"`python -m bench.{name}`" not in readme] == []
