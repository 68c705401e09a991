"""Which ephemeral keys have been used: the single-use record behind `ek_` keys.

A key opens one session. On one replica the record lives in memory (`LocalSpentKeys`); behind
a load balancer, a key spent on one replica must be refused by the others, so the record is
shared through Redis (`RedisSpentKeys`, `--redis-url`): spending is one atomic
`SET dragoman:ek:<nonce> 1 NX EXAT <expiry>`, which exactly one replica wins, and Redis forgets
the record when the key would have expired anyway.

Without Redis a key is single-use per replica: a client could open one session with it on each
replica of a shared key until it expires (at most `expires_after.seconds`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from dragoman.errors import ServerError
from dragoman.logs import get_logger

log = get_logger(__name__)

#: The prefix of the records in Redis, so that a shared Redis holds other things too.
REDIS_PREFIX = "dragoman:ek:"
#: A Redis that does not answer within this long fails the spend (the session is refused).
REDIS_TIMEOUT_S = 2.0


class KeyStoreUnavailable(ServerError):
    """The shared single-use record (Redis) cannot be reached: no ephemeral key can be spent."""

    code = "key_store_unavailable"


class SpentKeys(Protocol):
    async def spend(self, nonce: str, expires_at: int) -> bool:
        """Record the key `nonce` as used; True for the first spend, False ever after."""
        ...

    def spent(self, nonce: str) -> bool:
        """Whether this process knows the key as used (a cheap pre-check; `spend` decides)."""
        ...

    async def ping(self) -> bool:
        """Whether the record can be reached."""
        ...

    async def close(self) -> None: ...


class LocalSpentKeys:
    """The record in this process's memory: each entry lives until its key expires."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._spent: dict[str, int] = {}

    def __len__(self) -> int:
        self._prune()
        return len(self._spent)

    async def spend(self, nonce: str, expires_at: int) -> bool:
        self._prune()
        if nonce in self._spent:
            return False
        self._spent[nonce] = expires_at
        return True

    def spent(self, nonce: str) -> bool:
        return nonce in self._spent

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None

    def _prune(self) -> None:
        now = self.clock()
        for nonce in [n for n, expires_at in self._spent.items() if expires_at <= now]:
            del self._spent[nonce]


class RedisSpentKeys:
    """The record in Redis, shared by every replica that names the same `url`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._redis = Redis.from_url(
            url, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S
        )
        self._local = LocalSpentKeys()

    async def spend(self, nonce: str, expires_at: int) -> bool:
        try:
            first = await self._redis.set(REDIS_PREFIX + nonce, b"1", nx=True, exat=expires_at)
        except (RedisError, OSError) as exc:
            raise KeyStoreUnavailable(f"the ephemeral key record at Redis cannot be reached: {exc}") from exc
        if first:
            await self._local.spend(nonce, expires_at)
        return bool(first)

    def spent(self, nonce: str) -> bool:
        return self._local.spent(nonce)

    async def ping(self) -> bool:
        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self._redis.aclose()


def spent_keys(redis_url: str | None) -> SpentKeys:
    """The shared record when a Redis URL is set, else this process's."""
    if redis_url:
        log.info("ephemeral keys are single-use across replicas", record="redis")
        return RedisSpentKeys(redis_url)
    return LocalSpentKeys()
