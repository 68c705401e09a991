"""Sessions never touch a metric: they hand observations to their driver, which records them."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from dragoman.engines.workers import SerialWorker
from dragoman.sessions.base import Observation
from dragoman.sessions.speech.decoder import STEPS_COALESCED
from dragoman.sessions.speech.front import AUDIO_REFUSED_SECONDS
from tests.unit.test_driver import Channel, EchoSession, driver


class ObservingSession(EchoSession):
    """Observes a coalesced step for each "skip" and a second of refused audio for each "refuse"."""

    def __init__(self) -> None:
        super().__init__()
        self.observed: list[Observation] = []

    def receive(self, event: str) -> None:
        if event == "skip":
            self.observed.append(Observation(STEPS_COALESCED))
        elif event == "refuse":
            self.observed.append(Observation(AUDIO_REFUSED_SECONDS, 1.5))
        super().receive(event)

    def take_observations(self) -> list[Observation]:
        taken, self.observed = self.observed, []
        return taken


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_the_driver_records_what_the_session_observed() -> None:
    coalesced = sample("dragoman_transcription_steps_coalesced_total")
    refused = sample("dragoman_audio_refused_seconds_total")
    session = ObservingSession()
    channel = Channel(["skip", "skip", "refuse", "close"])
    worker: SerialWorker[str, str] = SerialWorker(str.upper, name="echo")
    await asyncio.wait_for(driver(session, channel, worker).run(), 5)
    assert sample("dragoman_transcription_steps_coalesced_total") == coalesced + 2
    assert sample("dragoman_audio_refused_seconds_total") == refused + 1.5
    assert session.observed == []
