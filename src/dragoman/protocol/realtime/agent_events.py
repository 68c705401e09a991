"""Server events of the Realtime agent (speech-to-speech) session, as pydantic models.

Field names and shapes follow `openai.types.realtime` (GA) and
`openai.types.beta.realtime` (beta). What the speech front says (`error`,
`input_audio_buffer.*`, `conversation.item.input_audio_transcription.*`) is written
as a transcription session writes it (`protocol.realtime.server_events`), and so is
`session.created` / `session.updated`, with the agent's session object.

`agent_server_event` writes the session's output events (`sessions.agent.events`)
in the client's generation. Beta names a few events apart:

| GA                                     | beta                             |
|----------------------------------------|----------------------------------|
| conversation.item.added                | conversation.item.created        |
| conversation.item.done                 | (none: not sent)                 |
| response.output_audio.delta / .done    | response.audio.delta / .done     |
| response.output_audio_transcript.*     | response.audio_transcript.*      |
| response.output_text.delta / .done     | response.text.delta / .done      |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

from dragoman.protocol.realtime import server_events as shared
from dragoman.protocol.realtime.conversation import (
    BetaResponse,
    Item,
    Part,
    Response,
    item_model,
    part_model,
    response_model,
)
from dragoman.protocol.realtime.generation import AGENT_PCM16_RATE, Generation, format_for
from dragoman.protocol.realtime.server_events import ServerEvent
from dragoman.sessions.agent import events as agent
from dragoman.sessions.agent.config import AgentConfig, TurnDetection
from dragoman.sessions.speech.events import SpeechEvent

_BETA_NAMES = {
    "conversation.item.added": "conversation.item.created",
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
    "response.output_text.delta": "response.text.delta",
    "response.output_text.done": "response.text.done",
}


def event_name(ga_name: str, generation: Generation) -> Any:
    """An event's type in the client's generation."""
    return _BETA_NAMES.get(ga_name, ga_name) if generation is Generation.BETA else ga_name


class ConversationItemAdded(ServerEvent):
    type: Literal["conversation.item.added", "conversation.item.created"]
    previous_item_id: str | None
    item: Item


class ConversationItemDone(ServerEvent):
    type: Literal["conversation.item.done"] = "conversation.item.done"
    previous_item_id: str | None
    item: Item


class ResponseCreated(ServerEvent):
    type: Literal["response.created"] = "response.created"
    response: Response | BetaResponse


class ResponseDone(ServerEvent):
    type: Literal["response.done"] = "response.done"
    response: Response | BetaResponse


class ResponseOutputItemAdded(ServerEvent):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    response_id: str
    output_index: int
    item: Item


class ResponseOutputItemDone(ServerEvent):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    response_id: str
    output_index: int
    item: Item


class _InPart(ServerEvent):
    response_id: str
    item_id: str
    output_index: int
    content_index: int


class ResponseContentPartAdded(_InPart):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    part: Part


class ResponseContentPartDone(_InPart):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    part: Part


class ResponseAudioDelta(_InPart):
    type: Literal["response.output_audio.delta", "response.audio.delta"]
    #: Base64 PCM16 at the session's output rate.
    delta: str


class ResponseAudioDone(_InPart):
    type: Literal["response.output_audio.done", "response.audio.done"]


class ResponseAudioTranscriptDelta(_InPart):
    type: Literal["response.output_audio_transcript.delta", "response.audio_transcript.delta"]
    delta: str


class ResponseAudioTranscriptDone(_InPart):
    type: Literal["response.output_audio_transcript.done", "response.audio_transcript.done"]
    transcript: str


class ResponseTextDelta(_InPart):
    type: Literal["response.output_text.delta", "response.text.delta"]
    delta: str


class ResponseTextDone(_InPart):
    type: Literal["response.output_text.done", "response.text.done"]
    text: str


class ResponseFunctionCallArgumentsDelta(ServerEvent):
    type: Literal["response.function_call_arguments.delta"] = "response.function_call_arguments.delta"
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    delta: str


class BetaResponseFunctionCallArgumentsDone(ServerEvent):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    arguments: str


class ResponseFunctionCallArgumentsDone(BetaResponseFunctionCallArgumentsDone):
    """GA's also names the function."""

    name: str


class OutputAudioBufferEvent(ServerEvent):
    """`output_audio_buffer.started` / `.stopped` / `.cleared`: the response's audio playout.

    OpenAI's types mark them "**WebRTC/SIP Only**", where the server plays the audio out;
    whether a WebSocket client is sent them is the session's choice.
    """

    type: Literal["output_audio_buffer.started", "output_audio_buffer.stopped", "output_audio_buffer.cleared"]
    response_id: str


class ConversationItemRetrieved(ServerEvent):
    type: Literal["conversation.item.retrieved"] = "conversation.item.retrieved"
    item: Item


class ConversationItemDeleted(ServerEvent):
    type: Literal["conversation.item.deleted"] = "conversation.item.deleted"
    item_id: str


class ConversationItemTruncated(ServerEvent):
    type: Literal["conversation.item.truncated"] = "conversation.item.truncated"
    item_id: str
    content_index: int
    audio_end_ms: int


# -- session events to the wire ----------------------------------------------------------

#: The session's events whose fields are the wire event's, one for one: the wire model, and
#: the event's GA type (beta's, where it differs, from `event_name`).
_SAME_FIELDS: dict[type[Any], tuple[type[ServerEvent], str]] = {
    agent.AudioDelta: (ResponseAudioDelta, "response.output_audio.delta"),
    agent.AudioDone: (ResponseAudioDone, "response.output_audio.done"),
    agent.AudioTranscriptDelta: (ResponseAudioTranscriptDelta, "response.output_audio_transcript.delta"),
    agent.AudioTranscriptDone: (ResponseAudioTranscriptDone, "response.output_audio_transcript.done"),
    agent.TextDelta: (ResponseTextDelta, "response.output_text.delta"),
    agent.TextDone: (ResponseTextDone, "response.output_text.done"),
    agent.FunctionArgumentsDelta: (
        ResponseFunctionCallArgumentsDelta,
        "response.function_call_arguments.delta",
    ),
    agent.ItemDeleted: (ConversationItemDeleted, "conversation.item.deleted"),
    agent.ItemTruncated: (ConversationItemTruncated, "conversation.item.truncated"),
    agent.OutputAudioStarted: (OutputAudioBufferEvent, "output_audio_buffer.started"),
    agent.OutputAudioStopped: (OutputAudioBufferEvent, "output_audio_buffer.stopped"),
    agent.OutputAudioCleared: (OutputAudioBufferEvent, "output_audio_buffer.cleared"),
}


def _item_added(event: agent.ItemAdded, generation: Generation) -> ServerEvent:
    return ConversationItemAdded(
        type=event_name("conversation.item.added", generation),
        previous_item_id=event.previous_item_id,
        item=item_model(event.item, generation),
    )


def _item_done(event: agent.ItemDone, generation: Generation) -> ServerEvent | None:
    if generation is Generation.BETA:
        return None  # beta has no conversation.item.done
    return ConversationItemDone(
        previous_item_id=event.previous_item_id, item=item_model(event.item, generation)
    )


def _output_item(event: agent.OutputItemAdded | agent.OutputItemDone, generation: Generation) -> ServerEvent:
    model = ResponseOutputItemAdded if isinstance(event, agent.OutputItemAdded) else ResponseOutputItemDone
    return model(
        response_id=event.response_id,
        output_index=event.output_index,
        item=item_model(event.item, generation),
    )


def _content_part(
    event: agent.ContentPartAdded | agent.ContentPartDone, generation: Generation
) -> ServerEvent:
    model = ResponseContentPartAdded if isinstance(event, agent.ContentPartAdded) else ResponseContentPartDone
    fields = {key: getattr(event, key) for key in ("response_id", "item_id", "output_index", "content_index")}
    return model(**fields, part=part_model(event.part))


def _arguments_done(event: agent.FunctionArgumentsDone, generation: Generation) -> ServerEvent:
    if generation is Generation.BETA:  # beta's event does not name the function
        return BetaResponseFunctionCallArgumentsDone(
            **{key: value for key, value in vars(event).items() if key != "name"}
        )
    return ResponseFunctionCallArgumentsDone(**vars(event))


#: The session's events with an item, a part, a response or a session object in them.
_WRITERS: dict[type[Any], Callable[[Any, Generation], ServerEvent | None]] = {
    agent.SessionConfigured: lambda event, generation: session_event(event, generation),
    agent.ItemAdded: _item_added,
    agent.ItemDone: _item_done,
    agent.ItemRetrieved: lambda event, generation: ConversationItemRetrieved(
        item=item_model(event.item, generation)
    ),
    agent.ResponseCreated: lambda event, generation: ResponseCreated(
        response=response_model(event.response, generation)
    ),
    agent.ResponseDone: lambda event, generation: ResponseDone(
        response=response_model(event.response, generation)
    ),
    agent.OutputItemAdded: _output_item,
    agent.OutputItemDone: _output_item,
    agent.ContentPartAdded: _content_part,
    agent.ContentPartDone: _content_part,
    agent.FunctionArgumentsDone: _arguments_done,
}


def agent_server_event(event: agent.ServerEvent, generation: Generation) -> ServerEvent | None:
    """The wire model of an agent session's output event for a client of `generation`;
    None where that generation has no such event (beta's `conversation.item.done`). What the
    speech front says is written as a transcription session writes it."""
    same = _SAME_FIELDS.get(type(event))
    if same is not None:
        model, ga_name = same
        return model(type=event_name(ga_name, generation), **vars(event))
    writer = _WRITERS.get(type(event))
    if writer is not None:
        return writer(event, generation)
    # The two tables hold every event of the agent's own; the rest are the speech front's.
    return shared.speech_event(cast(SpeechEvent, event))


def agent_wire_event(event: agent.ServerEvent, generation: Generation) -> dict[str, Any] | None:
    """`agent_server_event` as the JSON object sent, or None when nothing is sent."""
    model = agent_server_event(event, generation)
    return None if model is None else model.wire()


# -- the session object ------------------------------------------------------------------


def session_event(event: agent.SessionConfigured, generation: Generation) -> shared.SessionEvent:
    """`session.created` / `session.updated`, with the session object of the client's generation."""
    config = event.config
    created = event.created
    kind: shared.SessionEventType = "session.created" if created else "session.updated"
    body: dict[str, Any] = {"id": event.session_id, "object": "realtime.session"}
    if generation is Generation.GA:
        body |= _ga_session(config, event.engine_name)
    else:
        body |= _beta_session(config)
    return shared.SessionEvent(type=kind, session=body)


def _ga_session(config: AgentConfig, engine_name: str) -> dict[str, Any]:
    return {
        "type": "realtime",
        # Honest: the LLM that answers, whatever model the client named.
        "model": engine_name,
        "output_modalities": list(config.output_modalities),
        "instructions": config.instructions,
        "audio": {
            "input": {
                "format": format_for(Generation.GA, config.input_rate, codec=config.input_codec),
                "transcription": _transcription(config),
                "turn_detection": _turn_detection(config.turn_detection),
                "noise_reduction": shared.noise_reduction_object(config.noise_reduction),
            },
            "output": {
                "format": format_for(Generation.GA, config.output_rate, codec=config.output_codec),
                "voice": config.voice,
                "speed": config.speed,
            },
        },
        "tools": _tools(config),
        "tool_choice": _tool_choice(config, Generation.GA),
        "max_output_tokens": config.max_output_tokens or "inf",
    }


def _beta_session(config: AgentConfig) -> dict[str, Any]:
    # Beta's `Session.model` only names OpenAI's models, so the model is left out; its noise
    # reduction has no strength.
    noise = config.noise_reduction
    return {
        "modalities": ["text", "audio"] if "audio" in config.output_modalities else ["text"],
        "instructions": config.instructions,
        "voice": config.voice,
        "speed": config.speed,
        "input_audio_format": format_for(
            Generation.BETA, config.input_rate, AGENT_PCM16_RATE, config.input_codec
        ),
        "output_audio_format": format_for(
            Generation.BETA, config.output_rate, AGENT_PCM16_RATE, config.output_codec
        ),
        "input_audio_transcription": _transcription(config),
        "input_audio_noise_reduction": noise and {"type": noise.type},
        "turn_detection": _turn_detection(config.turn_detection),
        "tools": _tools(config),
        "tool_choice": _tool_choice(config, Generation.BETA),
        "max_response_output_tokens": config.max_output_tokens or "inf",
    }


def _transcription(config: AgentConfig) -> dict[str, Any] | None:
    settings = config.input_transcription
    if settings is None:
        return None
    return {"model": settings.model, "language": settings.language, "prompt": settings.prompt}


def _turn_detection(turns: TurnDetection | None) -> dict[str, Any] | None:
    if turns is None:
        return None
    return {
        **(shared.turn_detection_object(turns.vad) or {}),
        "create_response": turns.create_response,
        "interrupt_response": turns.interrupt_response,
    }


def _tools(config: AgentConfig) -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": dict(t.parameters)}
        for t in config.tools
    ]


def _tool_choice(config: AgentConfig, generation: Generation) -> Any:
    """GA forces a function with `{"type": "function", "name": ...}`; beta's string names it."""
    choice = config.tool_choice
    if isinstance(choice, str):
        return choice
    return {"type": "function", "name": choice.name} if generation is Generation.GA else choice.name
