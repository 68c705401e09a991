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

A key is a signed token (`secret_tokens.py`) that carries its session, so any replica that
shares the signing key accepts it; whether it was used is kept in `spent_keys.py` (this
process's memory, or Redis shared by the replicas).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from dragoman.errors import ClientError, InvalidValue
from dragoman.languages import primary_subtag
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
from dragoman.sessions.speech.events import Rejected
from dragoman.sessions.translation.config import Languages, TranslationConfig
from dragoman.transports.secret_tokens import TokenSigner, signing_key
from dragoman.transports.spent_keys import LocalSpentKeys, SpentKeys

#: OpenAI's bounds and default for `expires_after.seconds`.
MIN_TTL_S, MAX_TTL_S, DEFAULT_TTL_S = 10, 7200, 600
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
    #: The key's unique part, which the single-use record keeps.
    nonce: str

    def wire(self) -> dict[str, Any]:
        """`{"value", "expires_at"}`: the beta session objects' `client_secret`."""
        return {"value": self.value, "expires_at": self.expires_at}


class ClientSecretStore:
    """Mints keys and redeems each once: signed with `key` (shared by the replicas; random per
    process when None), spent in `spent` (this process's memory unless given Redis's)."""

    def __init__(
        self,
        key: bytes | None = None,
        spent: SpentKeys | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.spent = spent if spent is not None else LocalSpentKeys(clock)
        self._signer = TokenSigner(key if key is not None else signing_key(None))

    def mint(self, session: dict[str, Any], ttl_s: int = DEFAULT_TTL_S) -> ClientSecret:
        """A new key for `session` that expires `ttl_s` seconds from now; InvalidValue when the
        session is too large to carry in a key."""
        value, claims = self._signer.sign(session, int(self.clock()) + ttl_s)
        return ClientSecret(value, claims.expires_at, claims.session, claims.nonce)

    def peek(self, value: str) -> ClientSecret | None:
        """The live key `value`, left unspent; None when forged, expired or known as spent here."""
        claims = self._signer.verify(value)
        if claims is None or claims.expires_at <= self.clock() or self.spent.spent(claims.nonce):
            return None
        return ClientSecret(value, claims.expires_at, claims.session, claims.nonce)

    async def redeem(self, value: str) -> ClientSecret | None:
        """Spend the key `value`: it is returned once, while it lives, and None ever after (on
        every replica that shares the record). KeyStoreUnavailable when the record is down."""
        secret = self.peek(value)
        if secret is None or not await self.spent.spend(secret.nonce, secret.expires_at):
            return None
        return secret


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
    if not isinstance(kind, str) or kind not in OBJECTS:
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
        text = raw.decode("utf-8", "replace")
        body = load_json(text, "request body", strict_numbers=True) if raw.strip() else {}
    except BadJSON as exc:
        raise InvalidValue(str(exc)) from None
    if not isinstance(body, dict):
        raise InvalidValue("The request body must be a JSON object.")
    return body


def client_secrets_router(
    store: ClientSecretStore,
    translation_language: str = "de",
    translation_languages: Callable[[], Languages | None] = lambda: None,
    effective: Callable[[dict[str, Any]], dict[str, Any] | None] = lambda session: None,
) -> APIRouter:
    """`POST /v1/realtime/client_secrets` and `POST /v1/realtime/translations/client_secrets`;
    `translation_language` is the target of a translation session that names none, and
    `translation_languages` those the interpreter serves (None: no interpreter to ask): a key
    for another is refused when it is minted, not when it opens a session. `effective` is the
    session object a key for a Realtime session opens (`effective_session.py`; raises
    ClientError for a config that session refuses); where it gives None (no such service
    serving yet), the request's session is answered as it came."""
    router = APIRouter()

    @router.post("/v1/realtime/client_secrets")
    async def create(request: Request) -> JSONResponse:
        try:
            body = await _request_body(request)
            ttl, session = _ttl(body), bound_session(body)
            opens = effective(session)
            secret = store.mint(session, ttl)
        except ClientError as exc:
            return _error(exc)
        if opens is None:
            opens = {"id": "sess_" + uuid.uuid4().hex[:20], "object": OBJECTS[session["type"]], **session}
        return JSONResponse({"value": secret.value, "expires_at": secret.expires_at, "session": opens})

    @router.post("/v1/realtime/translations/client_secrets")
    async def create_translation(request: Request) -> JSONResponse:
        """OpenAI's `RealtimeTranslationClientSecretCreateResponse`: the key, and the session it opens."""
        try:
            body = await _request_body(request)
            ttl, session = _ttl(body), translation_session(body)
            config = TranslationConfig(translation_language).patched(parse_session_config(session))
            config = replace(config, language=primary_subtag(config.language))
            languages = translation_languages()
            if languages is not None and languages.targets:  # none yet: still loading
                languages.check(config.language)
            secret = store.mint(session, ttl)
        except ClientError as exc:
            return _error(exc)
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
