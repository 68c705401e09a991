"""Chat requests in OpenAI's shapes, and the llama.cpp grammar of a tool call."""

from __future__ import annotations

import pytest

from dragoman.engines.llm.base import ChatMessage, ForcedTool, ToolCall, ToolSpec
from dragoman.engines.llm.grammar import call_grammar
from dragoman.engines.llm.openai_format import (
    chat_messages,
    chat_tool_choice,
    chat_tools,
    responses_input,
    responses_tool_choice,
    responses_tools,
)
from dragoman.errors import InvalidValue

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CALL = ToolCall("call_abc", "get_weather", '{"city":"Paris"}')
CONVERSATION = (
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Weather in Paris?"),
    ChatMessage("assistant", "Let me check.", tool_calls=(CALL,)),
    ChatMessage("tool", '{"temp_c": 18}', tool_call_id="call_abc"),
    ChatMessage("assistant", "18 degrees."),
)


def test_chat_messages() -> None:
    out = chat_messages(CONVERSATION)
    assert out[0] == {"role": "system", "content": "Be brief."}
    assert out[2]["tool_calls"] == [
        {
            "id": "call_abc",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert out[3] == {"role": "tool", "content": '{"temp_c": 18}', "tool_call_id": "call_abc"}
    silent = chat_messages((ChatMessage("assistant", tool_calls=(CALL,)),))
    assert silent[0]["content"] is None  # what the API expects of a call without text


def test_template_messages_carry_arguments_as_objects() -> None:
    out = chat_messages(CONVERSATION, for_template=True)
    assert out[2]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    silent = chat_messages((ChatMessage("assistant", tool_calls=(CALL,)),), for_template=True)
    assert silent[0]["content"] == ""  # templates concatenate it


def test_tools_and_choices() -> None:
    [tool] = chat_tools([WEATHER])
    assert tool["type"] == "function" and tool["function"]["parameters"] == WEATHER.parameters
    assert chat_tools([ToolSpec("hang_up", "", {})])[0]["function"]["parameters"]["type"] == "object"
    assert chat_tool_choice("auto") == "auto"
    assert chat_tool_choice(ForcedTool("get_weather")) == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    [flat] = responses_tools([WEATHER])
    assert flat["name"] == "get_weather" and flat["parameters"] == WEATHER.parameters
    assert responses_tool_choice(ForcedTool("x")) == {"type": "function", "name": "x"}
    assert responses_tool_choice("required") == "required"


def test_responses_input_items() -> None:
    items = responses_input(CONVERSATION)
    assert [i["type"] for i in items] == [
        "message",
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert items[3] == {
        "type": "function_call",
        "call_id": "call_abc",
        "name": "get_weather",
        "arguments": CALL.arguments,
    }
    assert items[4] == {"type": "function_call_output", "call_id": "call_abc", "output": '{"temp_c": 18}'}
    only_call = responses_input((ChatMessage("assistant", tool_calls=(CALL,)),))
    assert [i["type"] for i in only_call] == ["function_call"]


def test_call_grammar_names_the_tools_and_their_arguments() -> None:
    grammar = call_grammar([WEATHER, ToolSpec("hang_up", "", {})])
    root = grammar.splitlines()[0]
    assert root.startswith("root ::=") and "tool-call-object" in root
    assert '\\"get_weather\\"' in grammar and '\\"hang_up\\"' in grammar and '\\"city\\"' in grammar
    assert len([line for line in grammar.splitlines() if line.startswith("root ::=")]) == 1
    assert call_grammar([WEATHER]) == call_grammar([WEATHER])  # cached, and stable


def test_a_schema_the_converter_refuses_is_the_requests_fault() -> None:
    bad = ToolSpec("x", "", {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}})
    with pytest.raises(InvalidValue) as caught:
        call_grammar([bad])
    assert caught.value.param == "tools" and "example.com" not in caught.value.message
    with pytest.raises(InvalidValue):
        call_grammar([ToolSpec("y", "", {"type": "object", "default": object()})])
