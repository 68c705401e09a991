"""What an engine reports about itself: shown in /health and logged at start-up."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class EngineInfo:
    #: The model name clients see (/v1/models, session events).
    name: str
    #: The registry name of the backend serving it.
    backend: str
    device: str = "cpu"
    #: The compute type in use: `auto` resolved for this CPU.
    compute_type: str = "default"
    #: Why that compute type: "requested", or what the CPU has and measured.
    compute_reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
