"""What sessions observe, recorded in the process's Prometheus metrics.

Sessions are sans-I/O and never touch a metric (`sessions/base.py`, `Observation`); the
driver collects their observations each time it collects their events, and records them
here, by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dragoman import metrics
from dragoman.logs import get_logger
from dragoman.sessions.base import Observation
from dragoman.sessions.speech.decoder import STEPS_COALESCED
from dragoman.sessions.speech.front import AUDIO_REFUSED_SECONDS
from dragoman.sessions.translation import session as translation

log = get_logger(__name__)

#: How each observation is recorded: the metric it adds its value to.
RECORDERS: dict[str, Callable[[float], None]] = {
    STEPS_COALESCED: metrics.STEPS_COALESCED.inc,
    AUDIO_REFUSED_SECONDS: metrics.AUDIO_REFUSED_SECONDS.inc,
    translation.INPUT_SECONDS: metrics.TRANSLATION_AUDIO_SECONDS.labels("in").inc,
    translation.OUTPUT_SECONDS: metrics.TRANSLATION_AUDIO_SECONDS.labels("out").inc,
    translation.FIRST_TEXT_SECONDS: metrics.TRANSLATION_FIRST_TEXT_SECONDS.observe,
    translation.END_LAG_SECONDS: metrics.TRANSLATION_END_LAG_SECONDS.observe,
}


def record(observations: Iterable[Observation]) -> None:
    for observation in observations:
        recorder = RECORDERS.get(observation.metric)
        if recorder is None:  # a session's bug; the metrics are not worth a connection
            log.warning("unknown observation", metric=observation.metric)
            continue
        recorder(observation.value)
