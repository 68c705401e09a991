"""The AlignAtt policy of each runtime preset.

Presets are defined once, as plain data, in `dragoman.engines.mt.presets` (engines
sit below streaming, so they cannot build `AlignAttParams`); this turns their
`policy` mappings into `AlignAttParams` for the sessions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dragoman.engines.mt.presets import PRESETS, presets_for_model
from dragoman.errors import ConfigError
from dragoman.streaming.alignatt import AlignAttParams


def policy_presets(model: str, default_preset: str) -> dict[str, AlignAttParams]:
    """The AlignAtt policy of each preset a session of `model` may choose.

    The runtime presets of the loaded model, plus the one the server was started
    with (its model may have been replaced by the user's own).
    """
    chosen = dict(presets_for_model(model))
    if default_preset in PRESETS:
        chosen.setdefault(default_preset, PRESETS[default_preset])
    try:
        return {name: _policy(p.policy) for name, p in chosen.items()}
    except TypeError as exc:  # a policy key that is no AlignAttParams field
        raise ConfigError(f"invalid MT preset policy: {exc}") from exc


def _policy(fields: Mapping[str, Any]) -> AlignAttParams:
    return replace(AlignAttParams(), **fields)
