"""What an agent session asks of its engines, from its settings: the speech front's config
and the LLM's request. Pure functions of the session's state, so the session only decides
when to ask."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dragoman.engines.llm.base import ChatMessage, ChatRequest, ForcedTool, ToolSpec
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.conversation import Conversation
from dragoman.sessions.agent.events import Item
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.speech.config import EngineProfile, SessionConfig


def front_config(config: AgentConfig, limits: AgentLimits, engine: EngineProfile) -> SessionConfig:
    """The speech front's settings: the agent's input audio and turns, the server's decoding.

    Without input transcription the client is sent only each turn's final transcript, so
    the front decodes a turn once, when it ends, and leaves the cores to the LLM and TTS
    while the user speaks.
    """
    transcription = config.input_transcription
    whole_turn = min(engine.max_item_seconds, engine.capabilities.max_audio_seconds)
    return dataclasses.replace(
        limits.speech,
        input_rate=config.input_rate,
        language=transcription.language if transcription else None,
        prompt=transcription.prompt if transcription else None,
        turn_detection=config.turn_detection.vad if config.turn_detection else None,
        chunk_seconds=limits.speech.chunk_seconds if transcription is not None else whole_turn,
        noise_reduction=config.noise_reduction,
    )


def chat_request(
    config: AgentConfig,
    conversation: Conversation,
    limits: AgentLimits,
    conversation_id: str,
    pending_turn: str | None = None,
    context: Sequence[Item] | None = None,
) -> ChatRequest:
    """The LLM request of a response; `pending_turn` is a user's turn not yet in the
    conversation (an early start's); `context` the response's own items instead of the
    conversation's."""
    choice = config.tool_choice
    tools = tuple(ToolSpec(t.name, t.description, t.parameters) for t in config.tools)
    instructions = config.instructions
    if tools and choice != "none" and limits.tool_preamble:
        instructions = f"{instructions}\n\n{tool_guidance(limits.tool_preamble, tools)}".strip()
    messages = conversation.messages(instructions, limits.context_chars, context)
    if pending_turn is not None:
        messages += (ChatMessage("user", pending_turn),)
    return ChatRequest(
        messages=messages,
        tools=tools,
        tool_choice=choice if isinstance(choice, str) else ForcedTool(choice.name),
        max_tokens=config.max_output_tokens or limits.max_output_tokens,
        # A client's own cap is the answer's length; without one, the answer ends at a sentence.
        answer_tokens=None if config.max_output_tokens else limits.answer_tokens,
        conversation=conversation_id,
    )


def tool_guidance(preamble: str, tools: Sequence[ToolSpec]) -> str:
    """The preamble, then what each tool is for, from its description: instructions that name
    the tools' purposes had the 1.5B call them where the preamble alone had it describe the call
    (bench.agent_tools)."""
    uses = [
        f"{t.name}: {' '.join(t.description.split()).rstrip('.')}" for t in tools if t.description.strip()
    ]
    return f"{preamble}\nYour tools: {'; '.join(uses)}." if uses else preamble
