"""What the server holds while it runs: the settings, the shared engines and their schedulers.

Engines are loaded once at start-up and shared by every session: sessions never
get model copies of their own (PROTOCOLS.md: per-slot model copies are the
reference voice agent's most complained-about limit).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dragoman.audio.vad import SileroModel, SileroVAD, SpeechProbability
from dragoman.config import Settings
from dragoman.engines.asr.base import ASREngine
from dragoman.engines.registry import create_asr_engine
from dragoman.engines.workers import StepScheduler
from dragoman.logs import get_logger
from dragoman.sessions.transcription.config import EngineProfile
from dragoman.weights import resolve

if TYPE_CHECKING:
    from dragoman.transports.websocket.mt import MTService

log = get_logger(__name__)


@dataclass
class TranscriptionService:
    engine: ASREngine
    scheduler: StepScheduler
    profile: EngineProfile
    vad_model: SileroModel | None

    def vad_factory(self) -> Callable[[], SpeechProbability] | None:
        model = self.vad_model
        if model is None:
            return None
        return lambda: SileroVAD(model)


@dataclass
class Runtime:
    settings: Settings
    started: float = field(default_factory=time.time)
    transcription: TranscriptionService | None = None
    mt: MTService | None = None

    async def start(self) -> None:
        """Load and warm every enabled service; a service is published only once it is warm."""
        if "transcription" in self.settings.services:
            self.transcription = await self._start_transcription()
        if "mt" in self.settings.services:
            from dragoman.transports.websocket.mt import MTService

            mt = MTService.from_settings(self.settings)
            await mt.start()
            self.mt = mt

    async def _start_transcription(self) -> TranscriptionService:
        settings = self.settings
        began = time.perf_counter()
        # In a thread: the event loop keeps answering /health while the models load.
        engine = await asyncio.to_thread(create_asr_engine, settings.asr, settings.cache_dir)
        vad_model = await asyncio.to_thread(SileroModel.load, resolve("silero-vad", settings.cache_dir))
        await asyncio.to_thread(engine.warm_up)
        scheduler = StepScheduler(engine, max_batch=settings.asr.max_batch)
        await scheduler.start()
        profile = EngineProfile(
            name=engine.name,
            capabilities=engine.capabilities,
            tokenizer=engine.tokenizer,
            max_item_seconds=settings.transcription.max_item_seconds,
        )
        log.info(
            "transcription ready",
            **engine.describe().as_dict(),
            seconds=round(time.perf_counter() - began, 2),
        )
        return TranscriptionService(engine=engine, scheduler=scheduler, profile=profile, vad_model=vad_model)

    def engines(self) -> list[dict[str, Any]]:
        """Each loaded engine's service, name, backend, device and compute type (for /health)."""
        out: list[dict[str, Any]] = []
        if self.transcription is not None:
            out.append(
                {"service": "transcription", "role": "asr"} | self.transcription.engine.describe().as_dict()
            )
        if self.mt is not None and self.mt.engine is not None:
            out.append({"service": "mt", "role": "mt"} | self.mt.engine.describe().as_dict())
        return out

    async def close(self) -> None:
        if self.transcription is not None:
            await self.transcription.scheduler.close()
            self.transcription.engine.close()
            self.transcription = None
        if self.mt is not None:
            await self.mt.close()
            self.mt = None
