"""Remote backends without a server: streamed chunks and events read into pieces, and failures.

The chunks and events are the `openai` SDK's own types, built from the JSON a
server sends. The end-to-end test against a real server is tests/engine/test_llm_remote.py.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

from dragoman.config import LLMSettings
from dragoman.engines.llm.base import ChatMessage, ChatRequest, LLMPiece, TextPiece, ToolCallPiece, ToolSpec
from dragoman.engines.llm.chat_completions import ChatCompletionsEngine, ChunkReader
from dragoman.engines.llm.remote import LLMServerError, LLMServerUnavailable, PieceSender, safe_url
from dragoman.engines.llm.responses import EventReader
from dragoman.engines.workers import CancelToken

WEATHER = ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}}})
REQUEST = ChatRequest(messages=(ChatMessage("user", "Weather in Paris?"),), tools=(WEATHER,))


def chunk(
    delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None
) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage,
        }
    )


def tool_delta(
    index: int, *, call_id: str | None = None, name: str | None = None, args: str = ""
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": args}
    if name is not None:
        function["name"] = name
    part: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        part.update(id=call_id, type="function")
    return {"tool_calls": [part]}


def text_event(delta: str, number: int) -> ResponseTextDeltaEvent:
    return ResponseTextDeltaEvent(
        type="response.output_text.delta",
        delta=delta,
        item_id="m",
        output_index=0,
        content_index=0,
        sequence_number=number,
        logprobs=[],
    )


def read_chunks(
    chunks: list[ChatCompletionChunk], request: ChatRequest = REQUEST
) -> tuple[list[LLMPiece], Any]:
    pieces: list[LLMPiece] = []
    finished = ChunkReader(CancelToken(), PieceSender(request, pieces.append), "here").read(iter(chunks))
    return pieces, finished


def test_streamed_tool_calls_are_assembled_and_passed_on_in_order() -> None:
    pieces, finished = read_chunks(
        [
            chunk({"role": "assistant", "content": "Checking"}),
            chunk({"content": " now."}),
            chunk(tool_delta(0, call_id="call_1", name="get_weather", args='{"ci')),
            chunk(tool_delta(0, args='ty": "Paris"}')),
            chunk(tool_delta(1, call_id="call_2", name="get_weather", args='{"city": "Rome"}')),
            chunk({}, finish="tool_calls"),
            chunk({}, usage={"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}),
        ]
    )
    assert [p.text for p in pieces if isinstance(p, TextPiece)] == ["Checking", " now."]
    calls = [p.call for p in pieces if isinstance(p, ToolCallPiece)]
    assert [(c.call_id, json.loads(c.arguments)) for c in calls] == [
        ("call_1", {"city": "Paris"}),
        ("call_2", {"city": "Rome"}),
    ]
    assert (finished.reason, finished.input_tokens, finished.output_tokens) == ("tool_calls", 40, 12)


def test_calls_written_as_text_are_parsed_out_of_it() -> None:
    text = 'One moment.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    parts = [chunk({"content": text[i : i + 5]}) for i in range(0, len(text), 5)]
    pieces, finished = read_chunks([*parts, chunk({}, finish="stop")])
    assert "".join(p.text for p in pieces if isinstance(p, TextPiece)) == "One moment."
    [call] = [p.call for p in pieces if isinstance(p, ToolCallPiece)]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Oslo"}
    assert call.call_id.startswith("call_")
    assert finished.reason == "tool_calls" and finished.input_tokens == 0  # no usage sent


def test_bad_arguments_and_tool_choice_none() -> None:
    pieces, finished = read_chunks(
        [chunk(tool_delta(0, call_id="c", name="get_weather", args="{not json")), chunk({}, "tool_calls")]
    )
    assert pieces == [] and finished.reason == "stop"
    quiet = ChatRequest(messages=REQUEST.messages, tools=(WEATHER,), tool_choice="none")
    text = 'Sure. <tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    pieces, finished = read_chunks([chunk({"content": text}), chunk({}, "length")], quiet)
    assert pieces == [TextPiece("Sure.")] and finished.reason == "length"


@pytest.mark.parametrize("said", [[], ["Half an ans", "wer"]])
def test_a_chat_stream_with_no_finish_reason_was_cut_short(said: list[str]) -> None:
    # llama_cpp.server's answer to an interrupted request: content (or none), then [DONE].
    chunks = [chunk({"role": "assistant", "content": ""}), *(chunk({"content": t}) for t in said)]
    with pytest.raises(LLMServerError, match="no finish_reason"):
        read_chunks(chunks)
    # Unless this side gave it up as the server ended it: then it is the cancelled answer it was.
    cancel = CancelToken()

    def given_up() -> Any:
        yield from chunks
        cancel.cancel()

    cut = ChunkReader(cancel, PieceSender(REQUEST, lambda piece: None), "here").read(given_up())
    assert cut.reason == "cancelled"
    # The same stream with its finish_reason and a usage chunk (`include_usage`) is an answer.
    usage = {"prompt_tokens": 9, "completion_tokens": len(said), "total_tokens": 9 + len(said)}
    pieces, finished = read_chunks([*chunks, chunk({}, finish="stop"), chunk({}, usage=usage)])
    assert spoken_text(pieces) == "".join(said)
    assert (finished.reason, finished.input_tokens, finished.output_tokens) == ("stop", 9, len(said))


def test_a_responses_stream_with_no_end_event_was_cut_short() -> None:
    delta = text_event("Half", 1)
    reader = EventReader(CancelToken(), PieceSender(REQUEST, lambda piece: None), "http://x")
    with pytest.raises(LLMServerError, match="ended its stream before the response"):
        reader.read(iter([delta]))


def test_cancel_stops_reading() -> None:
    cancel = CancelToken()
    pieces: list[LLMPiece] = []

    def emit(piece: LLMPiece) -> None:
        pieces.append(piece)
        cancel.cancel()

    chunks = [chunk({"content": f"word{i} "}) for i in range(50)]
    finished = ChunkReader(cancel, PieceSender(REQUEST, emit), "here").read(iter(chunks))
    assert finished.reason == "cancelled" and len(pieces) == 1


def test_responses_events() -> None:
    call = ResponseFunctionToolCall(
        type="function_call", call_id="call_9", name="get_weather", arguments='{"city": "Lima"}', id="fc_1"
    )
    usage = ResponseUsage.model_validate(
        {
            "input_tokens": 30,
            "input_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 0},
            "output_tokens": 9,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 39,
        }
    )
    events = [
        text_event("On it.", 1),
        ResponseOutputItemDoneEvent(
            type="response.output_item.done", item=call, output_index=1, sequence_number=2
        ),
        ResponseCompletedEvent.model_construct(
            type="response.completed", response=_Response(usage), sequence_number=3
        ),
    ]
    pieces: list[LLMPiece] = []
    finished = EventReader(CancelToken(), PieceSender(REQUEST, pieces.append), "here").read(iter(events))
    assert pieces[0] == TextPiece("On it.")
    assert isinstance(pieces[1], ToolCallPiece) and pieces[1].call.call_id == "call_9"
    assert json.loads(pieces[1].call.arguments) == {"city": "Lima"}
    assert (finished.reason, finished.input_tokens, finished.output_tokens, finished.cached_tokens) == (
        "tool_calls",
        30,
        9,
        20,
    )


class _Response:
    """The part of a `Response` the reader looks at."""

    def __init__(self, usage: ResponseUsage) -> None:
        self.usage = usage
        self.incomplete_details = None


def test_safe_url_drops_credentials() -> None:
    assert safe_url("https://user:secret@llm.example:8443/v1?key=abc#x") == "https://llm.example:8443/v1"
    assert safe_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_an_unreachable_server_is_a_clean_server_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = LLMSettings(
        backend="chat-completions",
        base_url=f"http://user:hunter2@127.0.0.1:{port}/v1",
        remote_model="m",
        timeout_s=5,
    )
    engine = ChatCompletionsEngine(settings)
    try:
        with pytest.raises(LLMServerUnavailable) as caught:
            engine.stream(REQUEST, CancelToken(), lambda piece: None)
    finally:
        engine.close()
    error = caught.value
    assert "hunter2" not in error.message and f"127.0.0.1:{port}" in error.message
    assert "hunter2" not in error.public_message and error.error_id in error.public_message


def spoken_text(pieces: list[LLMPiece]) -> str:
    return "".join(p.text for p in pieces if isinstance(p, TextPiece))


def test_a_long_spoken_answer_from_a_server_ends_at_the_sentence_past_its_soft_length() -> None:
    request = ChatRequest(messages=(ChatMessage("user", "Tell me about Paris."),), answer_tokens=6)
    words = [
        "Paris",
        "is",
        "the",
        "capital",
        "of",
        "France.",
        "It",
        "has",
        "many",
        "museums",
        "and",
        "parks",
        ",",
        "and",
        "more",
    ]
    chunks = [chunk({"content": (" " if i else "") + w}) for i, w in enumerate(words)]
    read: list[str] = []

    def stream() -> Any:
        for c in chunks:
            read.append(c.choices[0].delta.content or "")
            yield c
        yield chunk({}, finish="length")

    pieces: list[LLMPiece] = []
    finished = ChunkReader(CancelToken(), PieceSender(request, pieces.append), "here").read(stream())
    assert spoken_text(pieces) == "Paris is the capital of France."
    assert finished.reason == "stop"
    assert len(read) < len(chunks), "the rest of the stream is left unread"


def test_a_repetition_loop_from_a_server_is_cut_before_it_is_said() -> None:
    loop = ["Beijing", " is", " the", " capital", "."] * 6
    pieces, finished = read_chunks([chunk({"content": t}) for t in loop] + [chunk({}, finish="length")])
    text = spoken_text(pieces)
    assert text.startswith("Beijing is the capital.")
    assert text.count("Beijing") <= 2, text
    assert finished.reason == "stop"


def test_a_responses_stream_ends_at_the_soft_length_too() -> None:
    request = ChatRequest(messages=(ChatMessage("user", "Tell me about Rome."),), answer_tokens=2)
    words = ["Rome", "is", "old.", "It", "has", "seven", "hills", "and", "a", "river"]
    events = [text_event((" " if i else "") + w, i) for i, w in enumerate(words)]
    pieces: list[LLMPiece] = []
    finished = EventReader(CancelToken(), PieceSender(request, pieces.append), "http://x").read(iter(events))
    assert spoken_text(pieces) == "Rome is old."
    assert finished.reason == "stop"
