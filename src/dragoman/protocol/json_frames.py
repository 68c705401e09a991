"""JSON text frames, read with the bounds every protocol here needs.

`json.loads` recurses once per level of nesting, so a frame of 50 000 `[` raises
`RecursionError` (not `ValueError`), and whatever walks a value nested a few hundred
levels deep (pydantic, `json.dumps` echoing it) may too. It also accepts `\\ud800`, a
lone surrogate, which no UTF-8 frame can carry back out (echoing it breaks the
connection's next send) and no engine's tokenizer takes. `load_json` refuses both as
the client's fault, with `ValueError`, as it refuses any other frame that is not JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

#: Deepest nesting of objects and arrays a frame may hold. The deepest event served is a
#: session update with a tool's JSON Schema (an event, its session, tools, the tool, its
#: parameters, then two levels for each level of the schema): OpenAI's structured outputs
#: allow "up to 10 levels of nesting", which is 25 here.
MAX_JSON_DEPTH = 32

#: A JSON string (the unrolled loop: no backtracking, however long the string).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: A `\u` escape of a surrogate (either half); a frame without one cannot hold a lone
#: surrogate, since a text frame is valid UTF-8.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_OPEN = np.frombuffer(b"[{", dtype=np.uint8)
_CLOSE = np.frombuffer(b"]}", dtype=np.uint8)


class BadJSON(ValueError):
    """The frame is not JSON this server reads; the message says why, for the client."""


def _not_a_number(literal: str) -> Any:
    raise BadJSON(f"{literal} is not a JSON number.")


def load_json(
    raw: str, what: str = "message", max_depth: int = MAX_JSON_DEPTH, *, strict_numbers: bool = False
) -> Any:
    """The value of a JSON text frame; raises `BadJSON` (a ValueError) for anything else, with
    a message for the client that calls the frame `what` ("event", "message").

    `strict_numbers` refuses `NaN` and `Infinity`, which Python reads and RFC 8259 does not
    have: for a body whose content is written back (a client secret's session), where they
    would make the answer itself not JSON."""
    too_deep = BadJSON(f"The {what} nests deeper than {max_depth} levels.")
    try:
        value = json.loads(raw, parse_constant=_not_a_number) if strict_numbers else json.loads(raw)
    except BadJSON as exc:
        raise BadJSON(f"The {what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise too_deep from None
    except ValueError:
        raise BadJSON(f"The {what} is not valid JSON.") from None
    # Each level opens with one of these, so most frames need no further look.
    if raw.count("[") + raw.count("{") > max_depth and _depth(raw) > max_depth:
        raise too_deep
    if "\\u" in raw and _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadJSON(
                f"The {what} holds a lone surrogate (\\ud800-\\udfff), which is not text."
            ) from None
    return value


def _depth(raw: str) -> int:
    """How deep valid JSON text nests, counted without recursion and without a Python loop."""
    # Outside its strings, valid JSON is ASCII: brackets, punctuation, numbers and literals.
    structure = np.frombuffer(_STRING.sub("", raw).encode("ascii", "replace"), dtype=np.uint8)
    steps = np.isin(structure, _OPEN).astype(np.int32) - np.isin(structure, _CLOSE)
    return int(np.cumsum(steps).max(initial=0))
