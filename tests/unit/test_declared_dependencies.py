"""`pip install dragoman` declares what the product imports: every third-party module that
src/dragoman imports comes from a distribution of pyproject's dependencies (or of the extra that
its feature needs), or is brought by one of them, as that one's own metadata says."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement

from dragoman.weights.registry import MODELS

REPO = Path(__file__).resolve().parents[2]
#: Extras a product module may need: the qwen-torch backend and calibration; the WebRTC transport.
PRODUCT_EXTRAS = ("torch", "webrtc")
#: Imported directly but brought by a declared distribution: module -> (its distribution, the carrier).
CARRIED = {
    "starlette": ("starlette", "fastapi"),
    "pydantic_core": ("pydantic-core", "pydantic"),
    "jinja2": ("jinja2", "llama-cpp-python"),
    "jieba": ("jieba", "misaki"),
}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_of(requirement: str) -> str:
    return normal(re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0])


def imported_modules() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "src" / "dragoman").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"dragoman"}


def declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *(r for extra in PRODUCT_EXTRAS for r in extras[extra])]
    return {distribution_of(requirement) for requirement in wanted}


def test_every_module_the_product_imports_is_declared() -> None:
    modules = imported_modules()
    assert {"fastapi", "llama_cpp", "numpy"} <= modules
    by_module = packages_distributions()
    names = declared()
    undeclared = sorted(
        module
        for module in modules - set(CARRIED)
        if not {normal(d) for d in by_module.get(module, [module])} & names
    )
    assert undeclared == []


def test_what_is_carried_is_required_by_a_declared_distribution() -> None:
    names = declared()
    for module, (distribution, carrier) in CARRIED.items():
        assert carrier in names, module
        needs = {distribution_of(requirement) for requirement in requires(carrier) or []}
        assert distribution in needs, f"{carrier} does not require {distribution} (for {module})"


def test_the_lock_pins_every_declared_requirement_at_a_version_it_allows() -> None:
    """`make install` installs constraints.txt (the versions the tests passed with): a requirement
    added or moved in pyproject without `make constraints` would reach a new machine unpinned."""
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[normal(name.strip())] = version.strip()
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    assert len(wanted) > 40
    unpinned = [
        str(requirement)
        for requirement in map(Requirement, wanted)
        if (pin := pins.get(normal(requirement.name))) is None
        or not requirement.specifier.contains(pin, prereleases=True)
    ]
    assert unpinned == []


#: The packaged models `dragoman serve` loads with no flags: Whisper base, Silero, both Qwen GGUFs
#: (`auto` chooses between them on this CPU) and the default voices. Smart Turn (semantic_vad) and
#: Moonshine come from packages installed without their dependencies (requirements-nodeps.txt).
DEFAULT_MODELS = (
    "whisper-base",
    "silero-vad",
    "qwen2.5-0.5b-instruct-gguf",
    "qwen2.5-1.5b-instruct-gguf",
    "hibari-heart",
    "piper-en_US-joe-medium",
    "kokoro-v1.0",
)


def test_the_default_models_come_with_pip_install() -> None:
    """Before, the Qwen GGUF parts (the default MT and LLM) were only in requirements-nodeps.txt."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    main = {str(Requirement(r)) for r in project["dependencies"]}
    missing = [
        (name, distribution)
        for name in DEFAULT_MODELS
        for distribution in MODELS[name].distributions
        if str(Requirement(distribution)) not in main
    ]
    assert missing == []
