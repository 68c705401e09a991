"""The llama.cpp grammar of a tool call, from the tools' JSON Schemas.

llama-cpp-python converts JSON Schema to GBNF (`json_schema_to_gbnf`, a port of
llama.cpp's converter). The grammar is that of `calls.call_schema` with `name`
before `arguments`, the order the Qwen2.5 template writes, and up to two
whitespace characters before the object: the line break after `<tool_call>`, or
what is left of a token cut where a fenced or bare call began.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

from llama_cpp.llama_grammar import json_schema_to_gbnf

from dragoman.engines.llm.base import ToolSpec
from dragoman.engines.llm.calls import call_schema
from dragoman.errors import InvalidValue

_OBJECT_RULE = "tool-call-object"


def call_grammar(tools: Sequence[ToolSpec]) -> str:
    """GBNF for one call to one of `tools`; raises InvalidValue for a schema it cannot express."""
    # Cached by the schemas' JSON text: agents offer the same tools turn after turn.
    try:
        key = json.dumps([[t.name, dict(t.parameters)] for t in tools], sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidValue("tool parameters must be a JSON Schema object", param="tools") from exc
    return _grammar(key)


@functools.lru_cache(maxsize=64)
def _grammar(key: str) -> str:
    tools = [ToolSpec(name, "", parameters) for name, parameters in json.loads(key)]
    try:
        gbnf = json_schema_to_gbnf(json.dumps(call_schema(tools)), prop_order=["name", "arguments"])
    except Exception as exc:  # the converter raises bare Exceptions for what it does not support
        names = ", ".join(t.name for t in tools)
        raise InvalidValue(
            f"the parameters of the tools ({names}) are not a JSON Schema that can constrain decoding",
            param="tools",
        ) from exc
    body = re.sub(r"^root ::=", f"{_OBJECT_RULE} ::=", str(gbnf), flags=re.MULTILINE)
    return f"root ::= [ \\t\\n]{{0,2}} {_OBJECT_RULE}\n{body}"
