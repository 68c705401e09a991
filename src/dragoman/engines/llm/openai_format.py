"""Chat requests in OpenAI's shapes: Chat Completions messages, Responses input items, tools.

The embedded engine renders the model's chat template from the same message dicts
(`for_template=True`): templates read `content` as a string and write a call's
`arguments` with `tojson`, so there they are an object, not JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dragoman.engines.llm.base import ChatMessage, ForcedTool, ToolCall, ToolChoice, ToolSpec


def chat_messages(messages: Sequence[ChatMessage], *, for_template: bool = False) -> list[dict[str, Any]]:
    """Messages for `chat.completions.create` (or a chat template)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.role == "assistant" and message.tool_calls:
            if not message.content and not for_template:
                item["content"] = None
            item["tool_calls"] = [_chat_call(call, for_template) for call in message.tool_calls]
        if message.role == "tool":
            item["tool_call_id"] = message.tool_call_id or ""
        out.append(item)
    return out


def _chat_call(call: ToolCall, for_template: bool) -> dict[str, Any]:
    arguments: Any = call.arguments
    if for_template:
        arguments = _as_object(call.arguments)
    return {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _as_object(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments  # not JSON: the template shows it as a string


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters) or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def chat_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def responses_input(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Input items for `responses.create`: messages, function calls and their outputs."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": message.content,
                }
            )
            continue
        if message.content or not message.tool_calls:
            items.append({"type": "message", "role": message.role, "content": message.content})
        for call in message.tool_calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
    return items


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters) or {"type": "object", "properties": {}},
            # Strict mode demands schemas OpenAI's way (every property required); leave it off.
            "strict": False,
        }
        for tool in tools
    ]


def responses_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "name": choice.name}
    return choice
