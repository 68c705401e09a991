"""`/v1/realtime`: a voice-agent session over a WebSocket.

The frames are OpenAI Realtime events in the generation the client speaks (GA, or
beta with `OpenAI-Beta: realtime=v1`). A session claims a unit of the pipeline
pool first; past `--num-pipelines` it is told `session_limit_reached` and closed
with 1008. The session runs on the one driver, with a lane for each shared engine.
"""

from __future__ import annotations

import json
import uuid

from starlette.websockets import WebSocket

from dragoman.errors import ClientError, ServerError
from dragoman.logs import get_logger
from dragoman.protocol.realtime.agent_events import agent_wire_event
from dragoman.protocol.realtime.client_parsers import AgentClientParser, generation_of
from dragoman.protocol.realtime.generation import GA_RATE
from dragoman.sessions.agent.events import ClientEvent, ServerEvent, SessionConfigured
from dragoman.sessions.agent.session import AgentJob, AgentResult
from dragoman.sessions.speech.events import Error
from dragoman.transports.adapters import Frame
from dragoman.transports.agent_service import AgentService
from dragoman.transports.connections import ConnectionPolicy
from dragoman.transports.driver import SessionDriver
from dragoman.transports.pool import ADMISSION_WAIT_S
from dragoman.transports.websocket.bound import bound_config, start_bound
from dragoman.transports.websocket.realtime import refuse

log = get_logger(__name__)


class AgentCodec:
    """Agent events of one connection, written in the generation the client speaks."""

    def __init__(self, parser: AgentClientParser) -> None:
        self.parser = parser

    def parse(self, frame: Frame) -> ClientEvent:
        return self.parser.parse(frame)

    def write(self, event: ServerEvent) -> str | None:
        wire = agent_wire_event(event, self.parser.generation)
        return None if wire is None else json.dumps(wire, ensure_ascii=False)

    def refusal(self, error: ClientError, frame: Frame) -> ServerEvent:
        return Error(error)

    def failure(self, error: ServerError, event: ClientEvent | None) -> ServerEvent:
        return Error(error, getattr(event, "event_id", None))


async def serve_agent(websocket: WebSocket, service: AgentService) -> None:
    """Run one WebSocket (not yet accepted) as an agent session until either side closes."""
    session_id = "sess_" + uuid.uuid4().hex[:20]
    unit = await service.pool.acquire_within(session_id, ADMISSION_WAIT_S)
    if unit is None:
        service.usage["sessions_refused"] += 1
        await refuse(
            websocket,
            "session_limit_reached",
            f"All {len(service.pool.units)} voice-agent pipelines are in use; try again later.",
        )
        return
    drained = True
    try:
        await websocket.accept()
        service.usage["sessions_opened"] += 1
        parser = AgentClientParser(generation_of(websocket.headers.get("openai-beta", "")))
        # 24 kHz in both generations: GA's audio/pcm and beta's agent pcm16 alike.
        session = service.new_session(session_id, GA_RATE)
        session_log = log.bind(session=session_id, unit=unit.index)
        session_log.info("agent session opened", generation=parser.generation.value)
        policy = ConnectionPolicy.of(websocket)
        driver: SessionDriver[ClientEvent, ServerEvent, AgentJob, AgentResult] = SessionDriver(
            # A session opened with an ephemeral key starts with the config bound to it.
            start_bound(session, parser, bound_config(websocket), SessionConfigured),
            policy.channel(websocket),
            AgentCodec(parser),
            log=session_log,
            lanes=service.lanes(),
            idle_timeout_s=policy.idle_timeout_s,
            real_time=policy.real_time,
            engine_timeout_s=policy.engine_timeout_s,
        )
        try:
            with policy.connections.track(driver):
                await driver.run()
        finally:
            session.close()
            drained = driver.drained
            service.session_ended(session)
            session_log.info("agent session closed", drained=drained, **dict(session.stats))
    finally:
        service.pool.release(unit, drained=drained)
