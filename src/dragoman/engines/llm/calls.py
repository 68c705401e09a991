"""Tool calls as JSON: ids, the call object a model writes, and the schema that constrains it.

Models write a call as one JSON object, `{"name": ..., "arguments": {...}}` (Qwen2.5
inside `<tool_call>` tags, others in a code fence or bare). `parse_call_object`
turns such an object into a `ToolCall`; `call_schema` is the JSON Schema that a
constrained decoder enforces so the object is always one of the offered tools with
arguments valid for its schema.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Sequence
from typing import Any

from dragoman.engines.llm.base import ToolCall, ToolSpec

_ID_ALPHABET = string.ascii_letters + string.digits
#: Keys that models use for the arguments object (OpenAI's, and the older `parameters`).
_ARGUMENT_KEYS = ("arguments", "parameters")


def new_call_id() -> str:
    """`call_` and 24 random letters and digits, the shape of OpenAI's call ids."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def parse_call_object(obj: object, tools: Sequence[ToolSpec] = ()) -> ToolCall | None:
    """The call an object describes, or None when it is not a call (of an offered tool).

    Arguments may be an object or JSON text of one (some servers double-encode them);
    they come back as compact JSON text. With `tools` given, a name outside them is no call.
    """
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    if tools and name not in {tool.name for tool in tools}:
        return None
    arguments: Any = {}
    for key in _ARGUMENT_KEYS:
        if key in obj:
            arguments = obj[key]
            break
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(call_id=new_call_id(), name=name, arguments=dumps(arguments))


def normalize_arguments(text: str) -> str:
    """Streamed arguments as compact JSON text; `{}` for none. Raises ValueError if not an object."""
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError("tool arguments are not a JSON object")
    return dumps(value)


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """JSON Schema of a call to one of `tools`: `{"name": <its name>, "arguments": <its schema>}`."""
    if not tools:
        raise ValueError("a call schema needs at least one tool")
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": _arguments_schema(tool)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _arguments_schema(tool: ToolSpec) -> dict[str, Any]:
    """The tool's parameters; an empty or missing schema means an object of anything."""
    schema = dict(tool.parameters)
    return schema or {"type": "object"}


def find_object_end(text: str, start: int) -> int | None:
    """The index just past the JSON object that opens at `text[start]`, or None while it is open.

    Counts braces outside strings, so it works on a prefix as it streams in.
    """
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None
