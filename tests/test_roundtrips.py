"""harness/roundtrips.py counts what this process sends to a real Redis: single commands, a
pipeline's commands in one round trip, from sync and asyncio clients, and Django's cache;
and nothing once its block is left. A Redis of the test's own (PrivateRedis), so these run
with or without the suite's REDIS_URL."""

import asyncio

import pytest
import redis
import redis.asyncio
from django.conf import settings
from rest_framework.test import APIClient

from harness.private import PrivateRedis
from harness.roundtrips import command_names, count_redis


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server = PrivateRedis(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


def test_commands_and_pipelines_are_counted_by_name_and_by_round_trip(redis_url):
    client = redis.Redis.from_url(redis_url)
    client.ping()  # the connection's opening, outside the count

    with count_redis() as sent:
        client.set("a", b"*2\r\n$3\r\nGET\r\n")  # a value that looks like a command
        assert client.get("a") == b"*2\r\n$3\r\nGET\r\n"
        pipe = client.pipeline(transaction=False)
        pipe.incr("n").expire("n", 60).get("n")  # incr is sent as INCRBY
        pipe.execute()
    client.get("a")

    assert sent.names == ["SET", "GET", "INCRBY", "EXPIRE", "GET"]
    assert (sent.commands, sent.round_trips) == (5, 3)


def test_asyncio_clients_are_counted(redis_url):
    async def talk():
        client = redis.asyncio.Redis.from_url(redis_url)
        await client.ping()
        with count_redis() as sent:
            await client.set("b", "1")
            await client.get("b")
        await client.aclose()
        return sent

    sent = asyncio.run(talk())

    assert (sent.names, sent.round_trips) == (["SET", "GET"], 2)


def test_command_names_reads_what_redis_py_packs():
    packer = redis.Redis().connection_pool.make_connection()
    packed = packer.pack_commands([("SET", "k", b"\r\n*1\r\n"), ("zadd", "z", 1, "m")])

    assert command_names(packed) == ["SET", "ZADD"]
    assert command_names(packer.pack_command("GET", "k")) == ["GET"]


@pytest.mark.django_db
def test_the_suites_redis_is_counted_and_no_redis_counts_nothing():
    # Login counts its attempt in the rate limits, in Django's cache: Redis when the run has
    # REDIS_URL, the local-memory cache (nothing sent) when not.
    body = {"email": "nobody@example.com", "password": "not-the-password"}
    APIClient().post("/api/auth/login", body, format="json")

    with count_redis() as sent:
        assert APIClient().post("/api/auth/login", body, format="json").status_code == 401

    if settings.REDIS_URL:
        assert sent.commands > 0
    else:
        assert sent.names == []
