"""What the server holds while it runs: its services, and the CPU they share.

The runtime owns the CPU budget. On 2 cores, an ASR engine and an MT engine that
each took "half the cores" or their library's default oversubscribed the CPU:
with other work running, 2 torch threads decoded at 0.3 tok/s (OpenMP threads
spinning against each other) against 7.6 with 1. So each engine whose settings
leave `threads` at 0 gets an equal share of the cores this process may use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from dragoman.config import Settings
from dragoman.cpu import available_cores
from dragoman.logs import get_logger
from dragoman.sessions.translation.config import ASR_SCOPE
from dragoman.transports.agent_service import AgentService
from dragoman.transports.interpreter_service import InterpreterService
from dragoman.transports.services import MTService, TranscriptionService

log = get_logger(__name__)


class Service(Protocol):
    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def model_names(self) -> list[str]: ...


def thread_share(engines: int, cores: int | None = None) -> int:
    """Threads each of `engines` concurrent engines gets: an equal share, at least one."""
    return max(1, (cores if cores is not None else available_cores()) // max(1, engines))


@dataclass
class Runtime:
    settings: Settings
    started: float = field(default_factory=time.time)
    transcription: TranscriptionService | None = None
    mt: MTService | None = None
    agent: AgentService | None = None
    interpreter: InterpreterService | None = None
    #: The ASR engine's service, loaded for transcription or as the agent's STT.
    listening: TranscriptionService | None = None
    #: The MT engine's service, loaded for MT or for the interpreter.
    translating: MTService | None = None
    #: The services in start order, once started.
    services: list[Service] = field(default_factory=list)

    @property
    def _listens(self) -> bool:
        """Whether the ASR engine is loaded: for transcription, as the agent's STT, for the interpreter."""
        return bool({"transcription", "agent", "interpreter"} & set(self.settings.services))

    @property
    def _translates(self) -> bool:
        """Whether the MT engine is loaded: for MT, and for the interpreter."""
        return "mt" in self.settings.services or "interpreter" in self.settings.services

    def _budgeted(self) -> Settings:
        """The settings with each enabled engine's `threads` = its share of the cores, unless set.

        The agent's engines are not counted in the share. Its LLM gets every core when the agent
        is the only service: on a quiet 2-core machine 2 threads brought the first audio 75-220
        ms sooner than 1 (8 spoken questions, bench.agent_latency). Beside other services it
        gets every core but one: llama.cpp's threads spin, and with one other busy thread on 2
        cores, 11 tokens took 10.4 s on 2 LLM threads against 1.4 s on 1; it borrows that core
        back only while nothing else computes (`llm.idle_threads`, engines/llama_threads.py).
        Each TTS voice gets one thread.
        """
        services = self.settings.services
        enabled = [name for name, on in (("asr", self._listens), ("mt", self._translates)) if on]
        share = thread_share(len(enabled))
        updates: dict[str, Any] = {}
        if self._listens and self.settings.asr.threads == 0:
            updates["asr"] = self.settings.asr.model_copy(update={"threads": share})
        if self._translates and self.settings.mt.threads == 0:
            updates["mt"] = self.settings.mt.model_copy(update={"threads": share})
        if "agent" in services and self.settings.llm.threads == 0:
            alone = services == ["agent"]
            llm_threads = available_cores() if alone else max(1, available_cores() - 1)
            updates["llm"] = self.settings.llm.model_copy(update={"threads": llm_threads})
        speaks = "agent" in services or "interpreter" in services
        if speaks and self.settings.tts.threads == 0:
            updates["tts"] = self.settings.tts.model_copy(update={"threads": 1})
        log.info("cpu budget", cores=available_cores(), engines=len(enabled), threads_each=share)
        return self.settings.model_copy(update=updates)

    async def start(self) -> None:
        """Load and warm every enabled service; a service is published only once it is warm."""
        settings = self._budgeted()
        listening: TranscriptionService | None = None
        if self._listens:
            interprets = "interpreter" in settings.services
            scoped = {ASR_SCOPE: settings.interpreter.asr_routes} if interprets else {}
            listening = TranscriptionService(settings.asr, settings.transcription, settings.cache_dir, scoped)
            await listening.start()
            self.services.append(listening)
            self.listening = listening
            if "transcription" in settings.services:
                self.transcription = listening
        if self._translates:
            mt = MTService.from_settings(settings.mt, settings.cache_dir)
            await mt.start()
            self.services.append(mt)
            self.translating = mt
            if "mt" in settings.services:
                self.mt = mt
        if "agent" in settings.services:
            assert listening is not None
            agent = AgentService(settings.agent, settings.llm, settings.tts, settings.cache_dir, listening)
            await agent.start()
            self.services.append(agent)
            self.agent = agent
        if "interpreter" in settings.services:
            assert listening is not None and self.translating is not None
            interpreter = InterpreterService(
                settings.interpreter,
                settings.tts,
                settings.cache_dir,
                listening,
                self.translating,
                self.agent,
            )
            await interpreter.start()
            self.services.append(interpreter)
            self.interpreter = interpreter

    def engines(self) -> list[dict[str, Any]]:
        """Each loaded engine's service, name, backend, device and compute type (for /health)."""
        out: list[dict[str, Any]] = []
        listening = self.listening
        if listening is not None and listening.engine is not None:
            info = listening.engine.describe().as_dict()
            calls = listening.engine.capabilities.parallel_calls
            out.append(
                {
                    "service": "transcription",
                    "role": "asr",
                    "threads": listening.asr.threads,
                    "parallel_calls": calls,
                }
                | info
            )
        if self.translating is not None and self.translating.engine is not None:
            out.append({"service": "mt", "role": "mt"} | self.translating.engine.describe().as_dict())
        if self.agent is not None:
            out += self.agent.engines()
        return out

    def model_names(self) -> list[str]:
        return [name for service in self.services for name in service.model_names()]

    async def close(self) -> None:
        for service in reversed(self.services):
            await service.close()
        self.services.clear()
        self.transcription = self.listening = self.mt = self.agent = None
        self.interpreter = self.translating = None
