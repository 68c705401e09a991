"""Tool calls out of model text: call objects, the call schema, and the streaming markup filter."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from dragoman.engines.llm.base import ToolCall, ToolSpec
from dragoman.engines.llm.calls import (
    call_schema,
    find_object_end,
    new_call_id,
    normalize_arguments,
    parse_call_object,
)
from dragoman.engines.llm.markup import CallStart, Event, MarkupFilter

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HANG_UP = ToolSpec("hang_up", "End the call", {})


def run(
    text: str, *, step: int, parse_calls: bool = True, tools: tuple[ToolSpec, ...] = (WEATHER,)
) -> list[Event]:
    """Feed `text` in pieces of `step` characters; events with adjacent text joined."""
    markup = MarkupFilter(tools, parse_calls=parse_calls)
    events: list[Event] = []
    for i in range(0, len(text), step):
        events += markup.feed(text[i : i + step])
    events += markup.finish()
    joined: list[Event] = []
    for event in events:
        if isinstance(event, str) and joined and isinstance(joined[-1], str):
            joined[-1] += event
        else:
            joined.append(event)
    return joined


def spoken(events: list[Event]) -> str:
    return "".join(e for e in events if isinstance(e, str))


def calls(events: list[Event]) -> list[tuple[str, dict[str, object]]]:
    return [(e.name, json.loads(e.arguments)) for e in events if isinstance(e, ToolCall)]


def test_call_ids_look_like_openais() -> None:
    ids = {new_call_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", i) for i in ids)


def test_parse_call_object_accepts_the_common_shapes() -> None:
    call = parse_call_object({"name": "get_weather", "arguments": {"city": "Paris"}}, [WEATHER])
    assert call is not None and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    doubled = parse_call_object({"name": "get_weather", "arguments": '{"city": "Oslo"}'})
    assert doubled is not None and json.loads(doubled.arguments) == {"city": "Oslo"}
    older = parse_call_object({"name": "hang_up", "parameters": {}})
    assert older is not None and older.arguments == "{}"


@pytest.mark.parametrize(
    "obj",
    [
        {"name": "unknown_tool", "arguments": {}},
        {"arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": "not json"},
        {"name": "get_weather", "arguments": [1, 2]},
        ["get_weather"],
    ],
)
def test_parse_call_object_refuses_what_is_no_call(obj: object) -> None:
    assert parse_call_object(obj, [WEATHER]) is None


def test_normalize_arguments() -> None:
    assert normalize_arguments(' {"city": "Rome"} ') == '{"city":"Rome"}'
    assert normalize_arguments("") == "{}"
    with pytest.raises(ValueError):
        normalize_arguments("[1]")
    with pytest.raises(ValueError):
        normalize_arguments('{"city": ')


def test_call_schema_accepts_only_calls_of_the_tools() -> None:
    schema = call_schema([WEATHER, HANG_UP])
    jsonschema.validate({"name": "get_weather", "arguments": {"city": "Paris"}}, schema)
    jsonschema.validate({"name": "hang_up", "arguments": {}}, schema)
    for bad in (
        {"name": "get_weather", "arguments": {}},
        {"name": "other", "arguments": {}},
        {"name": "get_weather", "arguments": {"city": "Paris"}, "extra": 1},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    with pytest.raises(ValueError):
        call_schema([])


def test_find_object_end_ignores_braces_in_strings() -> None:
    text = 'x {"a": "}{", "b": {"c": [1, {"d": "\\"}"}]}} tail'
    end = find_object_end(text, 2)
    assert end is not None and text[end:] == " tail"
    assert json.loads(text[2:end])["a"] == "}{"
    assert find_object_end('{"a": {"b": 1}', 0) is None


QWEN = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_qwen_tag_call_with_lead_in(step: int) -> None:
    events = run(QWEN, step=step)
    assert spoken(events) == "Let me check."
    assert calls(events) == [("get_weather", {"city": "Paris"})]
    assert isinstance(events[0], str)  # the lead-in comes before the call


@pytest.mark.parametrize("step", [1, 4, 1000])
@pytest.mark.parametrize(
    "text",
    [
        'Sure!\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        '```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        'Sure! {"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"name":"get_weather","arguments":{"city":"Paris"}}',
    ],
)
def test_fenced_and_bare_calls(text: str, step: int) -> None:
    events = run(text, step=step)
    assert calls(events) == [("get_weather", {"city": "Paris"})]
    assert "{" not in spoken(events) and "`" not in spoken(events)
    assert spoken(events) in ("Sure!", "")


@pytest.mark.parametrize("step", [1, 2, 1000])
def test_a_call_opened_with_a_doubled_brace_says_nothing(step: int) -> None:
    # Qwen2.5-Coder-1.5B's `{{` token opened its calls under a client's own instructions, and
    # the first brace was spoken (bench.agent_tools).
    text = 'Sure. {{"name": "get_weather", "arguments": {"city": "Paris"}}} Done.'
    events = run(text, step=step)
    assert calls(events) == [("get_weather", {"city": "Paris"})]
    assert spoken(events) == "Sure.Done."
    markup = MarkupFilter((WEATHER,), parse_calls=False)
    assert markup.feed("{{") == [], "it may still open a call"
    [start] = markup.feed('"name":')
    assert start == CallStart(0, 1) and start.spoken_end(markup.raw) == 0
    assert spoken(run("Use {{braces}} here.", step=step)) == "Use {{braces}} here."


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_the_tools_tag_opens_a_call_and_is_never_spoken(step: int) -> None:
    # Qwen2.5-Coder-1.5B answered "Is it snowing in Moscow?" with "<tools></tools>": it meant a
    # call (bench.agent_tools); the engine decodes one from the tag on, under the tools' grammar.
    markup = MarkupFilter((WEATHER,), parse_calls=False)
    events = [e for i in range(0, 17, step) for e in markup.feed("<tools></tools>"[i : i + step])]
    assert events == [CallStart(0, len("<tools>"))]
    tagged = 'Sure. <tools>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tools> Done.'
    events = run(tagged, step=step)
    assert calls(events) == [("get_weather", {"city": "Oslo"})] and spoken(events) == "Sure.Done."
    assert spoken(run("No tools here: <tools></tools>.", step=step, tools=())) == "No tools here:."
    assert spoken(run("Use a <toolset> now.", step=step)) == "Use a <toolset> now."


def test_two_calls_in_a_row() -> None:
    text = QWEN + '\n<tool_call>\n{"name": "hang_up", "arguments": {}}\n</tool_call>'
    events = run(text, step=5, tools=(WEATHER, HANG_UP))
    assert calls(events) == [("get_weather", {"city": "Paris"}), ("hang_up", {})]
    assert spoken(events) == "Let me check."


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_plain_text_passes_whole(step: int) -> None:
    text = "It is 20 < 30 degrees, so {wear} a <b>light</b> coat; use `code` and ``quotes``."
    events = run(text, step=step)
    assert spoken(events) == text
    assert not calls(events)


def test_special_tokens_and_stray_tags_are_cut() -> None:
    events = run("Hello<|im_end|> there</tool_call>.", step=2)
    assert spoken(events) == "Hello there."


def test_text_is_held_only_while_it_may_be_markup() -> None:
    markup = MarkupFilter((WEATHER,), parse_calls=True)
    assert markup.feed("Let me check") == ["Let me check"]
    assert markup.feed(".\n<tool") == ["."]  # the line break and "<tool" wait
    assert markup.feed("_call>") == [CallStart(14, 25)]
    assert markup.feed('\n{"name": "get_weather", "arguments": {"ci') == []
    [call] = markup.feed('ty": "Paris"}}\n</tool_call>')
    assert isinstance(call, ToolCall) and call.name == "get_weather"
    assert markup.finish() == []


def test_whitespace_is_trimmed_at_the_ends_but_kept_inside() -> None:
    events = run("\n  Hello,\n  world.  \n", step=1)
    assert spoken(events) == "Hello,\n  world."


def test_the_engine_mode_stops_at_the_call_start() -> None:
    markup = MarkupFilter((WEATHER,), parse_calls=False)
    events = markup.feed('Okay. ```json\n{"na')
    assert events[0] == "Okay."
    [start] = [e for e in events if isinstance(e, CallStart)]
    assert markup.raw[start.offset] == "{" and markup.raw[start.markup :].startswith("```")
    assert start.spoken_end(markup.raw) == len("Okay.")
    assert markup.feed('me": "x"}') == []  # the engine decodes the call itself from here


def test_json_is_text_where_no_tool_is_offered() -> None:
    text = 'Here: {"name": "x", "arguments": {}} ```json\n{"a": 1}\n```'
    assert spoken(run(text, step=3, tools=())) == text
    # The Qwen tag is markup whatever is offered.
    events = run('<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>', step=3, tools=())
    assert spoken(events) == ""


def test_an_unfinished_call_is_dropped() -> None:
    events = run('Wait.\n<tool_call>\n{"name": "get_weather", "argu', step=4)
    assert spoken(events) == "Wait." and not calls(events)
