"""The layers import downward only (the brief's rule), read from the source itself."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "dragoman"
#: Top to bottom: a layer may import the ones below it, never those above.
LAYERS = ("transports", "protocol", "sessions", "streaming", "engines", "audio", "weights")


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "dragoman" and parts[1] in LAYERS else None


def test_each_layer_imports_only_the_layers_below_it() -> None:
    upward = []
    for layer in LAYERS:
        for path in sorted((SRC / layer).rglob("*.py")):
            for module in imports(path):
                target = layer_of(module)
                if target is not None and LAYERS.index(target) < LAYERS.index(layer):
                    upward.append(f"{path.relative_to(SRC)} imports {module}")
    assert upward == []


#: Sessions written before the rule held, each to move to `Observation`s; the test fails when one
#: of them no longer needs its place here, so the list only shrinks.
NOT_YET: frozenset[str] = frozenset()


def test_sessions_wire_models_and_algorithms_touch_no_metric() -> None:
    """Sans-I/O: a session hands its observations to the driver (`sessions/base.py`), and the
    transport counts what it sends (`transports/outbox.py`)."""
    found = {
        str(path.relative_to(SRC))
        for layer in ("protocol", "sessions", "streaming")
        for path in sorted((SRC / layer).rglob("*.py"))
        for module in imports(path)
        if module == "dragoman.metrics" or module.startswith("prometheus_client")
    }
    assert found == NOT_YET


def imported_from(folder: str, package: str) -> list[str]:
    return [
        f"{path.relative_to(REPO)} imports {module}"
        for path in sorted((REPO / folder).rglob("*.py"))
        for module in imports(path)
        if module == package or module.startswith(package + ".")
    ]


def test_the_tests_and_the_benchmarks_do_not_import_each_other() -> None:
    """What both need (real servers, clients, the MT fake) is in harness/; each stands alone."""
    assert imported_from("tests", "bench") == []
    assert imported_from("bench", "tests") == []
    assert imported_from("harness", "tests") == imported_from("harness", "bench") == []
