"""MT on a node over MT protocol v1, without sockets: the client's framing and state
(`engines/mt/mt_protocol_client.py`), node picking, and the property the design rests on: a
front-end session whose drafts are relayed to a node session gives the client exactly what
the node session gives when the client talks to it directly.

The node here is the real `MTSession` with the word-for-word fake engine (harness/mt_fakes.py),
reached through the real wire codec (`protocol/mt.py`) in both directions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from dragoman.config import MTSettings
from dragoman.engines.mt.base import DraftMode, MTDraft, MTRequest
from dragoman.engines.mt.mt_protocol_client import (
    InitAnswer,
    MTNodeError,
    NodeRefusal,
    NodeStream,
    decode_text,
    init_frame,
    parse_answer,
)
from dragoman.engines.mt.mt_protocol_remote import NodePool
from dragoman.engines.registry import MT_BACKENDS
from dragoman.protocol.mt import encode, parse_client_message
from dragoman.sessions.mt.events import Init, ServerEvent, Translation, Update, Word
from dragoman.sessions.mt.session import MTSession
from dragoman.streaming.alignatt import AlignAttParams
from dragoman.transports.remote_probes import node_health_url, remote_targets
from harness.mt_fakes import FakeEngine

PRESETS = {
    "plain": AlignAttParams(frontier_margin=1, max_draft_tokens=16, history_pairs=2),
    "careful": AlignAttParams(frontier_margin=2, max_draft_tokens=16, hold_back_target_units=1),
}


def mt_session(session_id: str, decode: Any, max_words: int = 50) -> MTSession:
    return MTSession(
        session_id=session_id,
        engine_name="fake-lexicon",
        directions=["en-de"],
        decode=decode,
        default_preset="plain",
        max_utterance_words=max_words,
        presets=PRESETS,
    )


class Node:
    """A node: an MT protocol v1 endpoint over one real MTSession, spoken to in JSON frames."""

    def __init__(self) -> None:
        self.engine = FakeEngine(["en-de"])
        self.sessions: list[MTSession] = []
        self.frames: list[dict[str, Any]] = []

    def open(self, frame: str) -> tuple[MTSession, list[str]]:
        self.frames.append(json.loads(frame))
        session = mt_session(f"node-{len(self.sessions)}", self.engine.decode)
        self.sessions.append(session)
        return session, self.send(session, frame)

    def send(self, session: MTSession, frame: str) -> list[str]:
        self.frames.append(json.loads(frame))
        session.receive(parse_client_message(frame).to_event())
        out = [encode(event) for event in session.events_to_send()]
        while (job := session.next_job()) is not None:
            session.job_done(job, self.engine.draft(job.request))
            out += [encode(event) for event in session.events_to_send()]
        return out


class RelayEngine(FakeEngine):
    """The front's engine: each draft is one update to the node (what MTProtocolRemote does over
    a WebSocket), one node session per cache key."""

    def __init__(self, node: Node) -> None:
        super().__init__(["en-de"])
        self.node = node
        self.open: dict[str, tuple[MTSession, NodeStream]] = {}

    def draft(self, request: MTRequest) -> MTDraft:
        key = request.cache_key or ""
        if key not in self.open:
            session, answers = self.node.open(init_frame(request))
            assert isinstance(parse_answer(answers[0]), InitAnswer), answers
            self.open[key] = (session, NodeStream())
        session, stream = self.open[key]
        answers = self.node.send(session, stream.update_frame(request))
        (answer,) = [parse_answer(a) for a in answers]
        assert isinstance(answer, dict), answer
        return stream.answer(request, answer)

    def decode(self, token_ids: Sequence[int]) -> str:
        return decode_text(token_ids)


def play(session: MTSession, engine: FakeEngine, events: list[Init | Update]) -> list[ServerEvent]:
    out: list[ServerEvent] = []
    for event in events:
        session.receive(event)
        out += session.events_to_send()
        while (job := session.next_job()) is not None:
            session.job_done(job, engine.draft(job.request))
            out += session.events_to_send()
    return out


def stream_of(sentences: list[str], init: Init) -> list[Init | Update]:
    """Words committed one at a time with two words of tail, then the final, per sentence."""
    events: list[Init | Update] = [init]
    seq, clock = 0, 0.0
    for utterance, sentence in enumerate(sentences):
        words = sentence.split()
        timed = [Word(w, clock + 500.0 * i, clock + 500.0 * i + 400) for i, w in enumerate(words)]
        for end in range(1, len(words) + 1):
            seq += 1
            tail = tuple(words[end : end + 2])
            events.append(Update(seq, utterance, tuple(timed[:end]), tail, timed[end - 1].end_ms or 0.0))
        seq += 1
        clock = (timed[-1].end_ms or 0.0) + 100
        events.append(Update(seq, utterance, tuple(timed), (), clock, is_final=True))
        clock += 1000
    return events


SENTENCES = ["Hello world, how are you?", "the big house is red.", "greetings the street"]


@pytest.mark.parametrize(
    "init",
    [
        Init(1, "en", "de"),
        Init(1, "en", "de", preset="careful", context_text="Talk", history=(("Hi.", "Hallo."),)),
        Init(
            1,
            "en",
            "de",
            overrides={"translation_alignatt_inaccessible_ms": 450, "translation_history_pairs": 1},
        ),
        Init(1, "en", "de", accepted_target_prefix="Hallo"),
    ],
)
def test_relayed_through_the_front_the_client_gets_what_the_node_gives(init: Init) -> None:
    events = stream_of(SENTENCES, init)
    direct_engine = FakeEngine(["en-de"])
    direct = play(mt_session("direct", direct_engine.decode), direct_engine, events)

    node = Node()
    relay = RelayEngine(node)
    relayed = play(mt_session("front", relay.decode), relay, events)

    assert [encode(e) for e in relayed] == [encode(e) for e in direct]
    assert any(isinstance(e, Translation) and e.committed_delta and not e.final for e in relayed)
    # One node session for the whole front session, opened with what the client's init set.
    assert len(node.sessions) == 1
    opened = node.frames[0]
    preset = init.preset or "plain"
    assert opened["preset"] == preset
    assert opened.get("context_text") == init.context_text
    assert [tuple(pair) for pair in opened.get("history", [])] == list(init.history)
    node_setup = node.sessions[0].setup
    front_params = {k: v for k, v in vars(PRESETS[preset]).items()}
    assert node_setup is not None
    if init.overrides:
        assert node_setup.params.inaccessible_ms == 450 and node_setup.params.history_pairs == 1
    else:
        assert vars(node_setup.params) == front_params


def test_an_update_maps_the_frontier_to_committed_words_and_tail() -> None:
    stream = NodeStream()
    request = MTRequest("en", "de", ("a", "b", "c", "d"), accessible_words=2)
    frame = json.loads(stream.update_frame(request))
    assert frame["words"] == [["a", None, None], ["b", None, None]]
    assert frame["tail"] == {"words": [["c", None, None], ["d", None, None]]}
    assert (frame["seq"], frame["utterance_id"], frame["is_final"]) == (1, 0, False)
    again = json.loads(stream.update_frame(request))
    assert again["seq"] == 2 and again["clock_ms"] > frame["clock_ms"]
    final = json.loads(stream.update_frame(MTRequest("en", "de", ("a", "b"), mode=DraftMode.FINAL)))
    assert final["is_final"] and "tail" not in final and len(final["words"]) == 2
    # The wire codec of the node side takes every frame the client makes.
    parse_client_message(stream.update_frame(request))


def test_an_answer_becomes_a_decided_draft_and_a_final_moves_to_the_next_utterance() -> None:
    stream = NodeStream()
    request = MTRequest("en", "de", ("Hello", "world"), target_prefix="Hallo")
    stream.update_frame(request)
    message = {
        "type": "translation",
        "seq": 1,
        "final": False,
        "committed_text": "Hallo Welt,",
        "buffer_text": "wie",
        "covered_source_units": 2,
        "stop_reason": "alignatt:commit_fast_path",
    }
    draft = stream.answer(request, message)
    assert draft.decided is not None and draft.decided.reason == "alignatt:commit_fast_path"
    assert decode_text(draft.token_ids[: draft.decided.tokens]) == " Welt,"
    assert decode_text(draft.token_ids[draft.decided.tokens :]).strip() == "wie"
    final = MTRequest("en", "de", ("Hello", "world"), target_prefix="Hallo Welt,", mode=DraftMode.FINAL)
    stream.update_frame(final)
    stream.answer(final, message | {"seq": 2, "final": True, "committed_text": "Hallo Welt, wie geht's"})
    assert json.loads(stream.update_frame(request))["utterance_id"] == 1


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"committed_text": "Guten Tag"}, "does not continue"),
        ({"forced_final": True}, "on its own"),
        ({"final": True}, "partial translation"),
    ],
)
def test_an_answer_out_of_step_with_the_front_is_an_engine_failure(
    change: dict[str, Any], needle: str
) -> None:
    stream = NodeStream()
    request = MTRequest("en", "de", ("Hello",), target_prefix="Hallo")
    stream.update_frame(request)
    message = {"type": "translation", "seq": 1, "final": False, "committed_text": "Hallo Welt"} | change
    with pytest.raises(MTNodeError, match=needle):
        stream.answer(request, message)


def test_a_final_that_rewrote_the_partial_keeps_what_the_front_showed() -> None:
    stream = NodeStream()
    final = MTRequest("en", "de", ("Hello", "world"), target_prefix="Hallo Welt", mode=DraftMode.FINAL)
    stream.update_frame(final)
    message = {"type": "translation", "seq": 1, "final": True, "committed_text": "Hallo, Welt und mehr"}
    draft = stream.answer(final, message)
    assert "Hallo Welt" + decode_text(draft.token_ids) == "Hallo Welt und mehr"


def test_frames_the_node_sends_are_parsed_strictly() -> None:
    ok = parse_answer(
        '{"type": "init_ok", "protocol_version": 1, "direction": "en-de", "preset": "fast", "model": "m"}'
    )
    assert ok == InitAnswer("en-de", "fast", "m")
    refusal = parse_answer(
        '{"type": "error", "code": "unsupported_direction", "message": "no", "supported": ["en-de"]}'
    )
    assert refusal == NodeRefusal("unsupported_direction", "no", ("en-de",))
    for bad in ("not json", "[1]", '{"type": "what"}', '{"type": "translation", "seq": "1"}'):
        with pytest.raises(MTNodeError):
            parse_answer(bad)


def test_init_carries_the_session_and_a_probe_only_the_direction() -> None:
    request = MTRequest(
        "en", "de", (), target_prefix="Hallo", history=(("a", "b"),), preset="fast", policy={"x": 1}
    )
    init = json.loads(init_frame(request))
    assert init["accepted_target_prefix"] == "Hallo" and init["history"] == [["a", "b"]]
    assert init["preset"] == "fast" and init["overrides"] == {"x": 1}
    assert set(json.loads(init_frame(request, probe=True))) == {
        "type",
        "protocol_version",
        "source_lang",
        "target_lang",
    }
    parse_client_message(init_frame(request))


def test_nodes_are_picked_round_robin_or_least_loaded() -> None:
    nodes = ["ws://a/", "ws://b/", "ws://c/"]
    rr = NodePool(nodes, "round-robin")
    assert [rr.order()[0] for _ in range(4)] == ["ws://a/", "ws://b/", "ws://c/", "ws://a/"]
    least = NodePool(nodes, "least-loaded")
    least.opened("ws://a/")
    least.opened("ws://a/")
    least.opened("ws://b/")
    assert least.order()[0] == "ws://c/"
    least.opened("ws://c/")
    assert least.order()[0] in ("ws://b/", "ws://c/")  # one each: taken in turn
    least.closed("ws://a/")
    least.closed("ws://a/")
    assert least.order()[0] == "ws://a/"
    with pytest.raises(ValueError):
        NodePool([], "round-robin")


def test_settings_take_nodes_as_a_list_or_comma_separated_and_choose_the_backend() -> None:
    settings = MTSettings(nodes=["ws://a:1/,ws://b:2/v1/mt", "ws://c:3/"])
    assert settings.nodes == ["ws://a:1/", "ws://b:2/v1/mt", "ws://c:3/"]
    assert "mt-protocol" in MT_BACKENDS


def test_health_probes_each_node_at_its_health_url() -> None:
    from dragoman.config import load_settings

    settings = load_settings(None, **{"mt.nodes": ["ws://n1:8765/", "wss://n2/v1/mt"]})
    targets = remote_targets(settings)
    assert [(t.role, t.probe_url) for t in targets] == [
        ("mt", "http://n1:8765/health"),
        ("mt", "https://n2/health"),
    ]
    assert node_health_url("ws://user:pw@h:1/x?y=1") == "http://h:1/health"
