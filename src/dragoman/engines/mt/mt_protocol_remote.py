"""MT on `dragoman mt-server` nodes over MT protocol v1: `/v1/mt` and the interpreter scale out.

    dragoman serve --mt-node ws://mt-1:8765/ --mt-node ws://mt-2:8765/

Why this level. AlignAtt commits a draft's tokens by where the model's alignment heads look
in the source; only the process that runs the model sees that attention. So the policy runs
on the node, as if its client had connected to it directly: each MT session of the front-end
(an `/v1/mt` connection, or one target language of an interpreter session) holds one MT
protocol v1 session on one node, opened at its first draft and closed when it ends
(`forget`). The front's own session (`sessions/mt/session.py`) still validates, routes
utterances and coalesces partials; each draft it asks for is one `update` to the node, and the
node's `translation` comes back as a draft whose commit the node decided
(`MTDraft.decided`), which the front commits as it is. `mt_protocol_client.py` does that
mapping without sockets; this module connects, picks nodes and waits.

The same words, preset and knobs reach the node's policy as a local one would see, so the
output is the node's own, and the latency is the node's plus one round trip (measured in
`tests/e2e/test_remote_mt_protocol_e2e.py`).

Nodes: `mt.nodes` (`--mt-node`, repeatable), picked per MT session by `mt.node_balance`:
`round-robin`, or `least-loaded` (fewest sessions this front-end has open there). Only
connects are retried (the next node, `mt.connect_retries` more times in all): an update that
reached a node is never sent twice. A node that cannot be reached, or does not answer within
`mt.timeout_s`, fails that draft with `mt_node_unavailable` and an error id (the front's
session answers `processing_failed` with it), and the next draft opens a new node session,
from the accepted target, on a node that answers ("accepted_target_prefix: the server
continues from it"). Sessions that need no MT never touch this.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from websockets.exceptions import InvalidHandshake, WebSocketException
from websockets.sync.client import ClientConnection, connect

from dragoman.config import MTSettings
from dragoman.engines.info import EngineInfo
from dragoman.engines.llm.remote import safe_url
from dragoman.engines.mt.base import (
    WARM_UP_KEY,
    DraftMode,
    MTCapabilities,
    MTDraft,
    MTEngine,
    MTRequest,
    nothing_drafted,
)
from dragoman.engines.mt.mt_protocol_client import (
    InitAnswer,
    MTNodeError,
    MTNodeUnavailable,
    NodeRefusal,
    NodeStream,
    decode_text,
    init_frame,
    parse_answer,
)
from dragoman.errors import EngineFailure
from dragoman.logs import get_logger

log = get_logger(__name__)

BACKEND = "mt-protocol"
#: The longest frame a node may send (a translation of a long utterance is a few KB).
MAX_FRAME_BYTES = 1 << 20
#: Seconds a connect may take, at most (then the next node is tried).
CONNECT_TIMEOUT_S = 5.0
#: Codes of a node's `error` to an `init` after which another node may serve the session.
_TRY_ANOTHER = frozenset({"busy"})


class NodePool:
    """The nodes and how many of this front-end's sessions each holds; picks where to open."""

    def __init__(self, urls: Sequence[str], balance: str) -> None:
        if not urls:
            raise ValueError("the MT protocol backend needs at least one node (mt.nodes)")
        if balance not in ("round-robin", "least-loaded"):
            raise ValueError(f"mt.node_balance must be round-robin or least-loaded, not {balance!r}")
        self.urls = list(urls)
        self.balance = balance
        self.load: Counter[str] = Counter()
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def order(self) -> list[str]:
        """The nodes to try for a new session, best first."""
        with self._lock:
            start = next(self._turn) % len(self.urls)
            rotated = self.urls[start:] + self.urls[:start]
            if self.balance == "least-loaded":
                rotated.sort(key=lambda url: self.load[url])  # stable: ties keep the rotation
            return rotated

    def opened(self, url: str) -> None:
        with self._lock:
            self.load[url] += 1

    def closed(self, url: str) -> None:
        with self._lock:
            self.load[url] -= 1


class _Kept(MTNodeError):
    """The node dropped one update (`processing_failed`); its session stays usable."""


@dataclass
class _NodeSession:
    url: str
    connection: ClientConnection
    stream: NodeStream


class MTProtocolRemote(MTEngine):
    """An MTEngine whose drafts are MT protocol v1 updates to `settings.nodes`."""

    def __init__(self, settings: MTSettings) -> None:
        self.pool = NodePool(settings.nodes, settings.node_balance)
        self.timeout_s = settings.timeout_s
        self.attempts = settings.connect_retries + 1
        self._headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.capabilities = MTCapabilities(
            attention=False,
            prompt_context=True,
            kv_reuse=True,
            frontier_stop=False,
            parallel_calls=settings.max_concurrent,
        )
        self._sessions: dict[str, _NodeSession] = {}
        self._lock = threading.Lock()
        self._anonymous = itertools.count()
        self._directions = sorted(settings.directions)
        self.name = "mt-node"
        self.chosen_preset = settings.preset if settings.preset != "auto" else None
        self._discover(settings)

    # -- the engine ---------------------------------------------------------------------

    def directions(self) -> list[str]:
        return list(self._directions)

    def draft(self, request: MTRequest) -> MTDraft:
        if request.mode is DraftMode.PREFILL:
            return nothing_drafted()  # the node's own session prefills its engine
        key = request.cache_key
        if key is None:  # one draft with no session: a node session of its own
            key = f"anonymous-{next(self._anonymous)}"
            try:
                return self._draft(key, request)
            finally:
                self.forget(key)
        return self._draft(key, request)

    def decode(self, token_ids: Sequence[int]) -> str:
        return decode_text(token_ids)

    def warm_up(self) -> None:
        """A draft through a node, so that a node that is down shows in the log at start-up; the
        server starts anyway: sessions that do not need MT are not held up by it."""
        try:
            super().warm_up()
        except EngineFailure as exc:
            log.warning("the MT nodes failed the warm-up", nodes=self._where(), error=exc.message)
        finally:
            self.forget(WARM_UP_KEY)

    def describe(self) -> EngineInfo:
        return EngineInfo(name=f"{self.name}@{self._where()}", backend=BACKEND, device="remote")

    def forget(self, cache_key: str) -> None:
        with self._lock:
            session = self._sessions.pop(cache_key, None)
        if session is not None:
            self._close(session)

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            self._close(session)

    # -- one draft ----------------------------------------------------------------------

    def _draft(self, key: str, request: MTRequest) -> MTDraft:
        with self._lock:
            session = self._sessions.get(key)
        if session is None:
            session = self._open(request)
            with self._lock:
                self._sessions[key] = session
        try:
            answer = self._exchange(session, request)
            if isinstance(answer, NodeRefusal):
                if answer.code == "processing_failed":
                    # "that update was dropped; the session stays usable"
                    raise self._failure(_Kept, session.url, f"failed the update: {answer.message}")
                self.forget(key)
                raise self._failure(MTNodeError, session.url, f"answered {answer.code}: {answer.message}")
            return session.stream.answer(request, answer)
        except TimeoutError as exc:
            self.forget(key)
            raise self._failure(MTNodeUnavailable, session.url, "did not answer in time") from exc
        except (OSError, WebSocketException) as exc:
            self.forget(key)
            raise self._failure(MTNodeUnavailable, session.url, f"dropped the session: {exc}") from exc
        except MTNodeError as exc:
            if not isinstance(exc, _Kept):
                self.forget(key)  # the stream is broken: the next draft opens a new session
            raise

    def _exchange(self, session: _NodeSession, request: MTRequest) -> NodeRefusal | dict[str, object]:
        """Send `request`'s update and wait for the node's answer to it."""
        session.connection.send(session.stream.update_frame(request))
        while True:
            answer = parse_answer(session.connection.recv(timeout=self.timeout_s))
            if isinstance(answer, NodeRefusal) and answer.seq in (None, session.stream.seq):
                return answer
            if isinstance(answer, dict) and answer["seq"] == session.stream.seq:
                return answer
            # An answer to an earlier update (its draft was given up): not this one's.

    def _open(self, request: MTRequest) -> _NodeSession:
        """A node session for `request`'s MT session, on the first node in order that takes
        it; connects (and `busy` refusals) are tried `self.attempts` times in all."""
        order = self.pool.order()
        reason = "was not tried"
        for attempt in range(self.attempts):
            url = order[attempt % len(order)]
            try:
                connection = self._connect(url)
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                reason = f"cannot be reached: {type(exc).__name__}"
                log.warning(
                    "MT node connect failed", node=safe_url(url), attempt=attempt + 1, reason=str(exc)
                )
                continue
            try:
                connection.send(init_frame(request))
                answer = parse_answer(connection.recv(timeout=self.timeout_s))
            except (OSError, TimeoutError, WebSocketException) as exc:
                connection.close()
                raise self._failure(MTNodeUnavailable, url, f"did not answer init: {exc}") from exc
            except MTNodeError:
                connection.close()
                raise
            if isinstance(answer, InitAnswer):
                self.pool.opened(url)
                return _NodeSession(url, connection, NodeStream())
            connection.close()
            if isinstance(answer, NodeRefusal) and answer.code in _TRY_ANOTHER:
                reason = f"answered {answer.code}"
                continue
            what = f"{answer.code}: {answer.message}" if isinstance(answer, NodeRefusal) else "a translation"
            raise self._failure(MTNodeError, url, f"refused the session ({what})")
        raise self._failure(MTNodeUnavailable, order[0], f"{reason} (and {self.attempts - 1} retries)")

    def _connect(self, url: str) -> ClientConnection:
        return connect(
            url,
            open_timeout=min(CONNECT_TIMEOUT_S, self.timeout_s),
            close_timeout=1.0,
            additional_headers=self._headers,
            max_size=MAX_FRAME_BYTES,
            compression=None,
        )

    def _close(self, session: _NodeSession) -> None:
        self.pool.closed(session.url)
        try:
            session.connection.close()
        except Exception as exc:  # a node already gone: nothing to release
            log.debug("MT node session close failed", node=safe_url(session.url), error=str(exc))

    # -- start-up -----------------------------------------------------------------------

    def _discover(self, settings: MTSettings) -> None:
        """The directions, model and default preset of the first node that answers.

        An `init` for a direction no node serves is answered with `unsupported_direction`
        and "the supported list"; an `init` for one of those gives the model and preset. With
        no node up, `mt.directions` (if set) is served and the server starts all the same."""
        for url in self.pool.urls:
            try:
                refusal = self._ask(url, MTRequest("und", "und", ()))
                if not isinstance(refusal, NodeRefusal) or not refusal.supported:
                    continue
                directions = self._directions or sorted(refusal.supported)
                source, _, target = directions[0].partition("-")
                answer = self._ask(url, MTRequest(source, target, (), preset=self.chosen_preset))
            except (OSError, TimeoutError, WebSocketException, MTNodeError) as exc:
                log.warning("MT node did not answer discovery", node=safe_url(url), reason=str(exc))
                continue
            if isinstance(answer, InitAnswer):
                self._directions = directions
                self.name = answer.model
                self.chosen_preset = answer.preset
                log.info("MT nodes", nodes=self._where(), model=self.name, preset=answer.preset)
                return
        log.warning("no MT node answered at start-up", nodes=self._where(), directions=self._directions)

    def _ask(self, url: str, request: MTRequest) -> InitAnswer | NodeRefusal | None:
        with self._connect(url) as connection:
            connection.send(init_frame(request, probe=request.preset is None))
            answer = parse_answer(connection.recv(timeout=self.timeout_s))
        return answer if isinstance(answer, InitAnswer | NodeRefusal) else None

    def _where(self) -> str:
        return ",".join(safe_url(url) for url in self.pool.urls)

    def _failure(self, kind: type[EngineFailure], url: str, what: str) -> EngineFailure:
        """A failure of `kind`, logged here with its error id, which is all a client is told."""
        failure = kind(f"the MT node at {safe_url(url)} {what}")
        log.error("remote engine failed", error_id=failure.error_id, code=failure.code, error=failure.message)
        return failure


def create(settings: MTSettings, cache_dir: Path | None = None) -> MTEngine:
    """The registry's factory: nothing is loaded here, the model is the nodes'."""
    return MTProtocolRemote(settings)
