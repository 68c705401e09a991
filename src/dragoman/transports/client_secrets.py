"""Ephemeral client keys: OpenAI's `POST /v1/realtime/client_secrets`, and
`POST /v1/realtime/translations/client_secrets` for translation sessions.

A browser must never hold a long-lived key. A backend that holds one mints a short-lived
key (`ek_…`) bound to a session config, and hands that to the page, which opens one
Realtime session (a WebSocket, or a WebRTC call) with it. The request and the response
are OpenAI's (`openai.types.realtime.client_secret_create_params` / `_response`):

    {"expires_after": {"anchor": "created_at", "seconds": 600}, "session": {"type": "realtime", ...}}
    -> {"value": "ek_…", "expires_at": 1733000000, "session": {"id": …, "object": …, "type": …, ...}}

A translation key binds `{"model": "gpt-realtime-translate", "audio": {...}}` and answers
with OpenAI's `RealtimeTranslationSession` (`type: "translation"`); the route of
`/v1/realtime/translations` applies it as that session's start.

`seconds` is OpenAI's range, 10 to 7200 (default 600). Unlike OpenAI's keys, which open
any number of sessions until they expire, a key here opens one session: the access guard
(`guard.py`) redeems it at the connection that uses it. The session bound to it is the
new session's starting config, so its `session.created` already shows it.

The store lives in memory (a restart revokes every key), holds at most `capacity` keys
(past that the oldest is dropped), prunes the expired ones whenever it is used, and keeps
only a key's SHA-256, so the lookup compares digests, not the secret.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from dragoman.errors import ClientError, InvalidValue
from dragoman.protocol.json_frames import BadJSON, load_json
from dragoman.protocol.realtime.client_parsers import AgentClientParser, ClientParser
from dragoman.protocol.realtime.generation import Generation
from dragoman.protocol.realtime.translation_client import (
    MODEL_NAMES,
    SESSION_SECONDS,
    known_model,
    parse_session_config,
)
from dragoman.protocol.realtime.translation_server import session_object
from dragoman.sessions.mt.validation import language as primary_language
from dragoman.sessions.speech.events import Rejected
from dragoman.sessions.translation.config import TranslationConfig

#: What every ephemeral key starts with, as OpenAI's do.
PREFIX = "ek_"
#: OpenAI's bounds and default for `expires_after.seconds`.
MIN_TTL_S, MAX_TTL_S, DEFAULT_TTL_S = 10, 7200, 600
#: Keys held at most; past it, minting drops the oldest.
DEFAULT_CAPACITY = 1024
#: The largest request body read (a session with tools and their schemas fits many times).
MAX_BODY_BYTES = 256 * 1024
#: The session object's `object`, by session type.
OBJECTS = {"realtime": "realtime.session", "transcription": "realtime.transcription_session"}


@dataclass(frozen=True)
class ClientSecret:
    """A minted key: its value (shown once, to the minter), expiry and the bound session."""

    value: str
    #: Seconds since the epoch, after which the key opens nothing.
    expires_at: int
    #: The session object (GA shape, with `type`), applied as the new session's config.
    session: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        """`{"value", "expires_at"}`: the beta session objects' `client_secret`."""
        return {"value": self.value, "expires_at": self.expires_at}


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


class ClientSecretStore:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, clock: Callable[[], float] = time.time) -> None:
        self.capacity = capacity
        self.clock = clock
        self._secrets: OrderedDict[bytes, ClientSecret] = OrderedDict()

    def __len__(self) -> int:
        self._prune()
        return len(self._secrets)

    def mint(self, session: dict[str, Any], ttl_s: int = DEFAULT_TTL_S) -> ClientSecret:
        """A new key for `session` that expires `ttl_s` seconds from now."""
        self._prune()
        while len(self._secrets) >= self.capacity:
            self._secrets.popitem(last=False)
        secret = ClientSecret(PREFIX + secrets.token_urlsafe(32), int(self.clock()) + ttl_s, session)
        self._secrets[_digest(secret.value)] = secret
        return secret

    def peek(self, value: str) -> ClientSecret | None:
        """The live key `value`, left unspent; None when unknown, spent or expired."""
        self._prune()
        return self._secrets.get(_digest(value))

    def redeem(self, value: str) -> ClientSecret | None:
        """Spend the key `value`: it is returned once, while it lives, and None ever after."""
        self._prune()
        return self._secrets.pop(_digest(value), None)

    def _prune(self) -> None:
        now = self.clock()
        for digest in [d for d, secret in self._secrets.items() if secret.expires_at <= now]:
            del self._secrets[digest]


# -- the request --------------------------------------------------------------------------


def _ttl(body: dict[str, Any]) -> int:
    expires_after = body.get("expires_after")
    if expires_after is None:
        return DEFAULT_TTL_S
    if not isinstance(expires_after, dict):
        raise InvalidValue("Invalid type for 'expires_after': expected an object.", param="expires_after")
    anchor = expires_after.get("anchor", "created_at")
    if anchor != "created_at":
        raise InvalidValue(
            "Invalid value for 'expires_after.anchor': only 'created_at' is supported.",
            param="expires_after.anchor",
        )
    seconds = expires_after.get("seconds", DEFAULT_TTL_S)
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not MIN_TTL_S <= seconds <= MAX_TTL_S:
        raise InvalidValue(
            f"Invalid value for 'expires_after.seconds': expected an integer from {MIN_TTL_S} to {MAX_TTL_S}.",
            param="expires_after.seconds",
        )
    return seconds


def bound_session(body: dict[str, Any]) -> dict[str, Any]:
    """The request's session object, checked as the session's own `session.update` would check it."""
    session = body.get("session", {"type": "realtime"})
    if not isinstance(session, dict):
        raise InvalidValue("Invalid type for 'session': expected an object.", param="session")
    kind = session.get("type")
    if kind not in OBJECTS:
        raise InvalidValue(
            "Invalid value for 'session.type': expected 'realtime' or 'transcription'.", param="session.type"
        )
    frame = json.dumps({"type": "session.update", "session": session})
    parsed = (
        ClientParser(Generation.GA).parse(frame)
        if kind == "transcription"
        else AgentClientParser(Generation.GA).parse(frame)
    )
    if isinstance(parsed, Rejected):
        raise parsed.error
    return session


def _error(error: ClientError, status: int = 400) -> JSONResponse:
    body = {"type": error.type, "code": error.code, "message": error.message, "param": error.param}
    return JSONResponse({"error": body}, status_code=status)


def translation_session(body: dict[str, Any]) -> dict[str, Any]:
    """The request's translation session (`RealtimeTranslationSessionCreateRequest`: `model`
    required, `audio` optional), checked as the session's own `session.update` would check it."""
    session = body.get("session")
    if not isinstance(session, dict):
        raise InvalidValue("'session' is required: an object with the translation model.", param="session")
    model = session.get("model")
    if not isinstance(model, str) or not known_model(model):
        raise InvalidValue(
            f"'session.model' must be one of {', '.join(sorted(MODEL_NAMES))}.", param="session.model"
        )
    parse_session_config(session)
    return {**session, "type": "translation"}


async def _request_body(request: Request) -> dict[str, Any]:
    """The JSON object posted, read up to MAX_BODY_BYTES; ClientError for anything else."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidValue(f"The request body is larger than {MAX_BODY_BYTES} bytes.")
    try:
        body = load_json(raw.decode("utf-8", "replace"), "request body") if raw.strip() else {}
    except BadJSON as exc:
        raise InvalidValue(str(exc)) from None
    if not isinstance(body, dict):
        raise InvalidValue("The request body must be a JSON object.")
    return body


def client_secrets_router(store: ClientSecretStore, translation_language: str = "de") -> APIRouter:
    """`POST /v1/realtime/client_secrets` and `POST /v1/realtime/translations/client_secrets`;
    `translation_language` is the target of a translation session that names none."""
    router = APIRouter()

    @router.post("/v1/realtime/client_secrets")
    async def create(request: Request) -> JSONResponse:
        try:
            body = await _request_body(request)
            ttl, session = _ttl(body), bound_session(body)
        except ClientError as exc:
            return _error(exc)
        secret = store.mint(session, ttl)
        effective = {"id": "sess_" + uuid.uuid4().hex[:20], "object": OBJECTS[session["type"]], **session}
        return JSONResponse({"value": secret.value, "expires_at": secret.expires_at, "session": effective})

    @router.post("/v1/realtime/translations/client_secrets")
    async def create_translation(request: Request) -> JSONResponse:
        """OpenAI's `RealtimeTranslationClientSecretCreateResponse`: the key, and the session it opens."""
        try:
            body = await _request_body(request)
            ttl, session = _ttl(body), translation_session(body)
            config = TranslationConfig(translation_language).patched(parse_session_config(session))
            config = replace(config, language=primary_language(config.language))
        except ClientError as exc:
            return _error(exc)
        secret = store.mint(session, ttl)
        effective = session_object(
            "sess_" + uuid.uuid4().hex[:20],
            session["model"],
            config,
            int(store.clock()) + SESSION_SECONDS,
            config.transcription or "",
        )
        body = {
            "value": secret.value,
            "expires_at": secret.expires_at,
            "session": effective.model_dump(mode="json"),
        }
        return JSONResponse(body)

    return router
