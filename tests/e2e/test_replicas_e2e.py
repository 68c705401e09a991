"""Replicas behind a load balancer share ephemeral keys: a key minted through one
`dragoman serve` opens a session on another that shares `--client-secret-key`, and opens one
session in all, across replicas, with `--redis-url` naming a real `redis-server`.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.transports.client_secrets import ClientSecretStore
from dragoman.transports.spent_keys import KeyStoreUnavailable, RedisSpentKeys
from harness.realtime_helpers import first_event, refused_status, sdk_client
from harness.server import Server, start, stop
from tests.e2e.redis_server import free_port, redis_server

pytestmark = pytest.mark.e2e

API_KEY = "sk-replicas"
#: A fresh key each run; a hex one, since a URL-safe token may begin with "-", which argparse
#: takes for an option (a CI run failed so).
SHARED = secrets.token_hex(32)
BOUND = {"type": "transcription", "audio": {"input": {"transcription": {"language": "de"}}}}
SESSION = {"type": "realtime", "instructions": "Answer in one word."}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, cache_dir: Path, redis_url: str
) -> Iterator[tuple[Server, Server]]:
    args = ["serve", "--cache-dir", str(cache_dir), "--services", "transcription", "--api-key", API_KEY]
    args += ["--client-secret-key", SHARED, "--redis-url", redis_url]
    folder = tmp_path_factory.mktemp("replicas")
    first = start(args, folder / "a.log", timeout=600.0)
    try:
        second = start(args, folder / "b.log", timeout=600.0)
    except BaseException:
        stop(first)
        raise
    yield first, second
    stop(first)
    stop(second)


# -- the single-use record in a real Redis ----------------------------------------------


async def test_of_many_replicas_redeeming_one_key_at_once_exactly_one_wins(redis_url: str) -> None:
    key = secrets.token_bytes(32)
    stores = [ClientSecretStore(key, RedisSpentKeys(redis_url)) for _ in range(4)]
    try:
        secret = stores[0].mint(SESSION, 60)
        redeemed = await asyncio.gather(*(store.redeem(secret.value) for store in stores * 3))
        assert [r for r in redeemed if r is not None] == [secret]
        assert all(await asyncio.gather(*(store.spent.ping() for store in stores)))
        other = stores[1].mint(SESSION, 60)
        assert await stores[2].redeem(other.value) == other, "each key is its own record"
    finally:
        for store in stores:
            await store.spent.close()


async def test_a_record_in_redis_expires_with_its_key(redis_url: str) -> None:
    import redis.asyncio

    store = ClientSecretStore(secrets.token_bytes(32), RedisSpentKeys(redis_url))
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        secret = store.mint(SESSION, 30)
        assert await store.redeem(secret.value) is not None
        ttl = await client.ttl("dragoman:ek:" + secret.nonce)
        assert 0 < ttl <= 30, ttl
    finally:
        await client.aclose()
        await store.spent.close()


async def test_an_unreachable_redis_is_a_server_fault_with_an_error_id() -> None:
    store = ClientSecretStore(secrets.token_bytes(32), RedisSpentKeys(f"redis://127.0.0.1:{free_port()}/0"))
    secret = store.mint(SESSION, 60)
    try:
        with pytest.raises(KeyStoreUnavailable) as failed:
            await store.redeem(secret.value)
        assert failed.value.error_id.startswith("err_")
        assert not await store.spent.ping()
    finally:
        await store.spent.close()


# -- two real servers ----------------------------------------------------------------------


async def test_a_key_minted_on_one_replica_opens_one_session_on_any(replicas: tuple[Server, Server]) -> None:
    minting, other = replicas
    secret = await sdk_client(minting, API_KEY).realtime.client_secrets.create(session=BOUND)  # type: ignore[arg-type]
    created = await first_event(other, secret.value)
    assert created["type"] == "session.created"
    assert created["session"]["audio"]["input"]["transcription"]["language"] == "de"
    assert await refused_status(minting, secret.value) == 401, "spent on the other replica: refused here too"
    assert await refused_status(other, secret.value) == 401
    # Both ways round: a key minted on the second opens a session on the first.
    back = await sdk_client(other, API_KEY).realtime.client_secrets.create(session=BOUND)  # type: ignore[arg-type]
    assert (await first_event(minting, back.value))["type"] == "session.created"
