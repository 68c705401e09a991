"""Hypothesis strategies for the protocol fuzzers: client frames, good, broken and hostile.

A frame is drawn as one of:

- a valid event (from a protocol's templates), as a client would send it;
- a valid event mutated: a field dropped, given a value of any JSON type (NaN and inf
  included), or an extra field added, at any depth;
- hostile text: not JSON, JSON that is not an object, nesting thousands of levels deep,
  a lone surrogate escape, a huge string, or a binary frame.

`Frame.bad` marks frames that no state of a session could accept, so that a test can
require an error for each.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: The fuzzers' settings. FUZZ_EXAMPLES=5000 fuzzes longer (the unit suite keeps it short).
#: Under CI (`CI=true`, as `.ci/run` sets it) the examples are derandomized, the same every run,
#: so that a red run is a regression of the code, not a new find of the search; every other run
#: draws new ones, and what one finds is kept as a plain test of its own case.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")),
    deadline=None,
    database=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Keys the protocols know, so that mutations and extra fields hit real fields too.
KEYS = (
    "type",
    "event_id",
    "session",
    "audio",
    "input",
    "output",
    "format",
    "rate",
    "transcription",
    "turn_detection",
    "model",
    "language",
    "prompt",
    "mstar",
    "chunk_seconds",
    "unfixed_chunks",
    "unfixed_tokens",
    "threshold",
    "prefix_padding_ms",
    "silence_duration_ms",
    "idle_timeout_ms",
    "eagerness",
    "item",
    "content",
    "text",
    "role",
    "response",
    "response_id",
    "instructions",
    "tools",
    "tool_choice",
    "voice",
    "speed",
    "output_modalities",
    "modalities",
    "max_output_tokens",
    "seq",
    "utterance_id",
    "words",
    "tail",
    "clock_ms",
    "is_final",
    "protocol_version",
    "source_lang",
    "target_lang",
    "preset",
    "overrides",
    "history",
    "context_text",
    "accepted_target_prefix",
)

#: Strings that mean something to some field somewhere.
MEANINGFUL = (
    "",
    " ",
    "inf",
    "-inf",
    "nan",
    "1e12",
    "-1",
    "3",
    "0.5",
    "pcm16",
    "audio/pcm",
    "server_vad",
    "semantic_vad",
    "transcription",
    "realtime",
    "message",
    "function_call_output",
    "input_text",
    "auto",
    "none",
    "required",
    "en",
    "de",
    "init",
    "update",
    "\ud800",
    "a\udfffb",
    "\x00",
    "\u202e",
    "日本語",
    "😀",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 16_000, 24_000, 48_000, 10_001, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(MEANINGFUL),
)

json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), children, max_size=4),
    ),
    max_leaves=10,
)


class Frame:
    """One client frame (a plain class, so that hypothesis prints it with `__repr__`: short)."""

    def __init__(self, raw: str | bytes, bad: bool, what: str) -> None:
        self.raw = raw
        #: No session state could accept it.
        self.bad = bad
        self.what = what

    def __repr__(self) -> str:
        cut = f"... ({len(self.raw)} long)" if len(self.raw) > 300 else ""
        return f"Frame({self.raw[:300]!r}{cut}, bad={self.bad}, what={self.what!r})"


def strict_loads(frame: str) -> Any:
    """A server frame read as a browser's `JSON.parse` reads it: NaN and Infinity, which Python
    writes and reads, are not JSON (RFC 8259), so a frame holding one fails here."""

    def refuse(literal: str) -> Any:
        raise AssertionError(f"the server wrote {literal}, which is not JSON: {frame[:200]}")

    return json.loads(frame, parse_constant=refuse)


def dumps(value: Any) -> str:
    """As a client's JSON library writes it: NaN and Infinity literals, \\u escapes."""
    return json.dumps(value)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `value` a mutation can touch (the empty path is the event itself)."""
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*path, index))
    return found


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@st.composite
def mutated(draw: st.DrawFn, events: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A valid event with one to three things wrong (or merely extra) in it."""
    event = copy.deepcopy(draw(events))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(event)))
        target = _at(event, path)
        op = draw(st.sampled_from(["replace", "delete", "extra"]))
        if op == "extra" and isinstance(target, dict):
            target[draw(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)))] = draw(json_values)
        elif path and op == "delete":
            parent = _at(event, path[:-1])
            del parent[path[-1]]
        elif path:
            _at(event, path[:-1])[path[-1]] = draw(json_values)
    return event


def _nested(depth: int, inner: str, kind: str) -> str:
    opener, closer = ("[", "]") if kind == "list" else ('{"a":', "}")
    return opener * depth + inner + closer * depth


@st.composite
def hostile(draw: st.DrawFn, types: Sequence[str]) -> Frame:
    """A frame no session takes: every one must be answered with an error."""
    kind = draw(
        st.sampled_from(
            ["text", "binary", "not_object", "deep", "surrogate", "huge_type", "unknown", "no_type"]
        )
    )
    if kind == "text":
        raw: str | bytes = draw(st.text(max_size=40).filter(lambda t: not _is_json_object(t)))
    elif kind == "binary":
        raw = draw(st.binary(max_size=40))
    elif kind == "not_object":
        raw = dumps(draw(json_values.filter(lambda v: not isinstance(v, dict))))
    elif kind == "deep":
        depth = draw(st.sampled_from([33, 40, 200, 999, 1000, 5000, 100_000]))
        field = draw(st.sampled_from(["session", "item", "overrides", "words", "zzz"]))
        inner = _nested(depth, "1", draw(st.sampled_from(["list", "dict"])))
        raw = f'{{"type": "{draw(st.sampled_from(types))}", "{field}": {inner}}}'
    elif kind == "surrogate":
        field = draw(st.sampled_from(["type", "event_id", "prompt", "text", "source_lang", "zzz"]))
        raw = f'{{"type": "{draw(st.sampled_from(types))}", "{field}": "x\\udc00"}}'
    elif kind == "huge_type":
        raw = dumps({"type": "x" * draw(st.sampled_from([1000, 100_000]))})
    elif kind == "unknown":
        name = draw(st.text(max_size=30).filter(lambda t: t not in types))
        raw = dumps({"type": name, "session": draw(json_values)})
    else:
        raw = dumps(draw(st.dictionaries(st.sampled_from(KEYS[1:]), json_values, max_size=3)))
    return Frame(raw, bad=True, what=kind)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


@st.composite
def frames(draw: st.DrawFn, events: st.SearchStrategy[dict[str, Any]], types: Sequence[str]) -> Frame:
    """Valid, mutated and hostile frames of one protocol."""
    # Valid frames most: they take a session into the states the others are then tried in.
    kind = draw(st.sampled_from(["valid", "valid", "valid", "mutated", "mutated", "hostile"]))
    if kind == "valid":
        return Frame(dumps(draw(events)), bad=False, what=kind)
    if kind == "mutated":
        return Frame(dumps(draw(mutated(events))), bad=False, what=kind)
    return draw(hostile(types))


# -- audio ---------------------------------------------------------------------------


def pcm(samples: NDArray[np.floating]) -> str:
    from dragoman.audio.pcm import float_to_pcm16

    return base64.b64encode(float_to_pcm16(samples)).decode()


def audio_payloads(speech: Callable[[float], Any], quiet: Callable[[float], Any]) -> st.SearchStrategy[Any]:
    """Append payloads: turns (speech, then a pause), speech or silence alone, odd byte counts, bad
    base64, empty, past the item cap, not a string."""
    import numpy as np

    seconds = st.sampled_from([0.01, 0.1, 0.25, 0.5, 1.0, 2.5])
    turn = st.tuples(st.sampled_from([0.3, 0.6, 1.2]), st.sampled_from([0.3, 0.8, 1.5]))
    return st.one_of(
        turn.map(lambda t: pcm(np.concatenate([speech(t[0]), quiet(t[1])]))),
        turn.map(lambda t: pcm(np.concatenate([quiet(t[1]), speech(t[0])]))),
        seconds.map(lambda s: pcm(speech(s))),
        seconds.map(lambda s: pcm(quiet(s))),
        st.binary(max_size=301).map(lambda b: base64.b64encode(b).decode()),  # odd counts too
        st.text(alphabet="ABCD+/=!-_ \n%", max_size=40),  # bad base64, mostly
        st.sampled_from(["", "A" * 131_072]),  # 96 KiB decoded: 3.07 s, past the fuzzed item cap
        json_values,
    )
