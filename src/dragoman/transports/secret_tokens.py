"""Ephemeral keys that any replica accepts: an `ek_` key is a signed token, not a row in one
server's memory.

    ek_<payload>.<tag>        payload = base64url(zlib(JSON {"v": 1, "s": session, "e": expiry, "n": nonce}))
                              tag     = base64url(HMAC-SHA256(key, DOMAIN + payload))

The HMAC covers the bound session config, the expiry and a random nonce, so a replica that
shares the key (`--client-secret-key`, `DRAGOMAN_CLIENT_SECRET_KEY`) verifies a key another
one minted, and nobody without it can forge or alter one. The nonce names the key for the
single-use record (`spent_keys.py`). The payload is signed, not encrypted: the session config
is readable by whoever holds the key, which is the client it was minted for.

The key travels in an `Authorization` header or a WebSocket subprotocol, whose lines servers
cap at about 8 KB, so a token is at most MAX_TOKEN_CHARS; the compressed config of a session
with a few tools fits many times over.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import zlib
from dataclasses import dataclass
from typing import Any

from dragoman.errors import ConfigError, InvalidValue

#: What every ephemeral key starts with, as OpenAI's do.
PREFIX = "ek_"
#: The longest token minted: a header line of websockets' and h11's default limits holds it.
MAX_TOKEN_CHARS = 6144
#: The shortest shared key taken (bytes): HMAC-SHA256 wants a key as long as its output.
MIN_KEY_BYTES = 32
#: Separates these MACs from any other use of the same key.
_DOMAIN = b"dragoman.client_secret.v1\x00"
_VERSION = 1


@dataclass(frozen=True)
class Claims:
    """What a verified token says."""

    #: The session object bound to the key (GA shape, with `type`).
    session: dict[str, Any]
    #: Seconds since the epoch, after which the key opens nothing.
    expires_at: int
    #: Random, unique per key: what the single-use record keeps.
    nonce: str


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key(configured: str | None) -> bytes:
    """The shared key from the settings (UTF-8, at least MIN_KEY_BYTES), or, when none is set,
    a random one for this process alone: its keys then open sessions on this replica only."""
    if not configured:
        return secrets.token_bytes(MIN_KEY_BYTES)
    key = configured.encode()
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(
            f"the client secret key must be at least {MIN_KEY_BYTES} bytes "
            "(for example: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return key


class TokenSigner:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def sign(self, session: dict[str, Any], expires_at: int) -> tuple[str, Claims]:
        """A new token for `session`, and its claims; InvalidValue when the session is too large."""
        claims = Claims(session, expires_at, secrets.token_urlsafe(16))
        document = {"v": _VERSION, "s": session, "e": expires_at, "n": claims.nonce}
        raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        payload = _b64encode(zlib.compress(raw, 9))
        token = f"{PREFIX}{payload}.{_b64encode(self._tag(payload))}"
        if len(token) > MAX_TOKEN_CHARS:
            raise InvalidValue(
                f"The session is too large to bind to a client secret ({len(token)} characters "
                f"as a key; at most {MAX_TOKEN_CHARS}): send the rest with session.update.",
                param="session",
            )
        return token, claims

    def verify(self, token: str) -> Claims | None:
        """The claims of a token this key signed, or None for anything else (expiry aside)."""
        if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
            return None
        payload, dot, tag = token[len(PREFIX) :].partition(".")
        if not dot:
            return None
        try:
            presented = _b64decode(tag)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(presented, self._tag(payload)):
            return None
        # Signed by the key, so the payload is ours; it is still parsed defensively.
        try:
            document = json.loads(zlib.decompress(_b64decode(payload)))
        except (binascii.Error, ValueError, zlib.error):
            return None
        if not isinstance(document, dict) or document.get("v") != _VERSION:
            return None
        session, expires_at, nonce = document.get("s"), document.get("e"), document.get("n")
        if not isinstance(session, dict) or not isinstance(expires_at, int) or not isinstance(nonce, str):
            return None
        return Claims(session, expires_at, nonce)

    def _tag(self, payload: str) -> bytes:
        return hmac.new(self._key, _DOMAIN + payload.encode("ascii", "replace"), hashlib.sha256).digest()
