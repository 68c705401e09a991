"""The client side of MT protocol v1 for one translation session on a node, without sockets.

A front-end whose MT runs on `dragoman mt-server` nodes (`mt_protocol_remote.py`) keeps one
node session per MT session of its own. Its session (`sessions/mt/session.py`) still
validates, routes utterances and coalesces partials ("latest wins"); the node runs the policy
with its own model and attention. `NodeStream` turns each `MTRequest` of the front's session
into one `update`, and the node's answer into an `MTDraft` whose commit the node decided
(`MTDraft.decided`), so the front commits exactly what the node committed.

Mapping (the protocol's own terms):
- the request's words before its frontier (`accessible_words`) go as committed `words`, the
  rest as `tail.words`, with null timestamps: the front already applied `inaccessible_ms`,
  and "a word without timestamps is committed, so it stays accessible" on the node, whose
  frontier is then the front's;
- `clock_ms` is a counter (monotone, and no word has an `end_ms` it must reach);
- a FINAL request is `is_final: true`; the node's answer closes the utterance and the next
  update uses `utterance_id + 1` ("the next update must use utterance_id + 1");
- the session's preset, AlignAtt knobs, `context_text` and history go in `init`, and on a
  reconnect the accepted target too (`accepted_target_prefix`: "the server continues from it
  and never re-emits or contradicts it").

Tokens are Unicode code points: the front decodes them back to the node's text exactly, with
no vocabulary to keep.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dragoman.engines.mt.base import Decided, DraftMode, MTDraft, MTRequest
from dragoman.errors import EngineFailure

PROTOCOL_VERSION = 1


class MTNodeUnavailable(EngineFailure):
    """No MT node could be reached, or the node did not answer in time."""

    code = "mt_node_unavailable"


class MTNodeError(EngineFailure):
    """An MT node refused the session or failed an update."""

    code = "mt_node_error"


def encode_text(text: str) -> list[int]:
    return [ord(char) for char in text]


def decode_text(ids: Sequence[int]) -> str:
    return "".join(chr(i) for i in ids)


@dataclass(frozen=True)
class InitAnswer:
    """The node's `init_ok`: the model it runs and the preset it chose."""

    direction: str
    preset: str
    model: str


@dataclass(frozen=True)
class NodeRefusal:
    """The node's `error` frame."""

    code: str
    message: str
    supported: tuple[str, ...] = ()
    seq: int | None = None


def init_frame(request: MTRequest, *, probe: bool = False) -> str:
    """The `init` that opens a node session for `request`'s MT session.

    `probe`: only the direction, to learn what the node serves (nothing else is sent)."""
    frame: dict[str, Any] = {
        "type": "init",
        "protocol_version": PROTOCOL_VERSION,
        "source_lang": request.source_lang,
        "target_lang": request.target_lang,
    }
    if probe:
        return json.dumps(frame)
    if request.preset:
        frame["preset"] = request.preset
    if request.policy:
        frame["overrides"] = dict(request.policy)
    if request.context_text:
        frame["context_text"] = request.context_text
    if request.history:
        frame["history"] = [[source, target] for source, target in request.history]
    if request.target_prefix:
        frame["accepted_target_prefix"] = request.target_prefix
    return json.dumps(frame, ensure_ascii=False)


def parse_answer(frame: str | bytes) -> InitAnswer | NodeRefusal | dict[str, Any]:
    """A node frame: `init_ok`, an `error`, or a `translation` (its JSON object, checked)."""
    try:
        message = json.loads(frame)
    except ValueError as exc:
        raise MTNodeError(f"an MT node sent a frame that is not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise MTNodeError("an MT node sent a frame that is not a JSON object")
    kind = message.get("type")
    if kind == "init_ok":
        return InitAnswer(
            str(message.get("direction")), str(message.get("preset")), str(message.get("model"))
        )
    if kind == "error":
        supported = message.get("supported") or ()
        seq = message.get("seq")
        return NodeRefusal(
            str(message.get("code")),
            str(message.get("message", ""))[:300],
            tuple(str(d) for d in supported) if isinstance(supported, list) else (),
            seq if isinstance(seq, int) else None,
        )
    if kind == "translation":
        for key, kinds in (("seq", int), ("committed_text", str), ("final", bool)):
            if not isinstance(message.get(key), kinds):
                raise MTNodeError(f"an MT node sent a translation without a valid {key}")
        return message
    raise MTNodeError(f"an MT node sent an unknown frame type {str(kind)[:40]!r}")


class NodeStream:
    """One MT session's stream of updates to its node, and what the node's answers commit.

    The node's committed text of the open utterance is kept in step with the front's: every
    answer's `committed_text` must extend the request's `target_prefix` (what the front
    accepted from earlier answers); an answer that does not is a broken stream, and the
    engine opens a new node session from the accepted target.
    """

    def __init__(self) -> None:
        self.seq = 0
        self.utterance_id = 0
        self.clock_ms = 0.0

    def update_frame(self, request: MTRequest) -> str:
        """The `update` for `request`; its `seq` is `self.seq` afterwards."""
        words = list(request.source_words)
        final = request.mode is DraftMode.FINAL
        accessible = len(words) if final or request.accessible_words is None else request.accessible_words
        accessible = max(0, min(accessible, len(words)))
        self.seq += 1
        self.clock_ms += 1.0
        frame: dict[str, Any] = {
            "type": "update",
            "seq": self.seq,
            "utterance_id": self.utterance_id,
            "words": [[word, None, None] for word in words[:accessible]],
            "clock_ms": self.clock_ms,
            "is_final": final,
        }
        if accessible < len(words):
            frame["tail"] = {"words": [[word, None, None] for word in words[accessible:]]}
        return json.dumps(frame, ensure_ascii=False)

    def answer(self, request: MTRequest, message: dict[str, Any]) -> MTDraft:
        """The node's `translation` of the last update as a draft whose commit it decided.

        Raises MTNodeError for an answer that does not continue the accepted target, or a
        server-side rollover (`forced_final`) of an utterance the front still holds open."""
        final = request.mode is DraftMode.FINAL
        committed = message["committed_text"]
        prefix = request.target_prefix
        if not committed.startswith(prefix):
            if not final:
                raise MTNodeError("an MT node's committed text does not continue the accepted target")
            # A final "replaces the streamed partial at the line level"; the front's target is
            # append-only, so the words the node changed are kept as the front showed them.
            committed = prefix + _after_common_words(prefix, committed)
        if message.get("forced_final") and not final:
            raise MTNodeError(
                "an MT node closed an utterance on its own (its --max-utterance-words is lower)"
            )
        if message["final"] != final:
            raise MTNodeError("an MT node answered a final update with a partial translation, or the reverse")
        if final:
            self.utterance_id += 1
        delta = committed[len(prefix) :]
        buffer = message.get("buffer_text") or ""
        if not isinstance(buffer, str):
            raise MTNodeError("an MT node sent a translation with a buffer_text that is not text")
        ids = encode_text(delta)
        if buffer.strip() and not final:
            ids += encode_text(" " + buffer.strip())
        covered = message.get("covered_source_units")
        reason = message.get("stop_reason")
        return MTDraft(
            ids,
            None,
            finished=final,
            computed_tokens=0,
            decided=Decided(
                tokens=len(delta),
                covered=covered if isinstance(covered, int) and not isinstance(covered, bool) else None,
                reason=reason if isinstance(reason, str) else "node",
            ),
        )


def _after_common_words(prefix: str, text: str) -> str:
    """What `text` adds after the words it shares with `prefix`, with its leading space."""
    kept = prefix.split()
    words = text.split()
    shared = 0
    while shared < min(len(kept), len(words)) and kept[shared] == words[shared]:
        shared += 1
    rest = " ".join(words[max(shared, len(kept)) :])
    return (" " + rest) if rest and prefix else rest
