"""The ``redis`` memory backend against a real redis-server: the Memory contract, exact prefixes, errors, increment."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from aeon_kernel import ConfigError, MemoryStoreError
from aeon_kernel.config import AeonConfig
from aeon_kernel.engine import Engine
from aeon_kernel.testing import memory_conformance
from aeon_plugins.redis_memory import RedisMemory
from tests.support.int64_counters import Int64CounterCases
from tests.support.redis_server import redis_url  # noqa: F401 - the session fixture

_URL: list[str] = []


@pytest.fixture(autouse=True, scope="module")
def _server(redis_url: str) -> Iterator[None]:  # noqa: F811 - the imported fixture, requested by name
    """The conformance factory takes no arguments, so it finds the server's URL here."""
    _URL.append(redis_url)
    yield
    _URL.pop()


def redis_fresh_namespace() -> RedisMemory:
    """Every call gets its own namespace on the shared server, so tests never see each other's keys."""
    return RedisMemory(_URL[-1], namespace=f"test:{uuid4().hex}:")


TestRedis = memory_conformance(redis_fresh_namespace)


@pytest.fixture
def memory() -> Iterator[RedisMemory]:
    backend = redis_fresh_namespace()
    yield backend
    backend.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:  # noqa: F811
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- storage layout and prefixes --------------------------------------------------------------------------------

GLOBBY = [
    "a",
    "a*",
    "a*b",
    "a?",
    "a?b",
    "a[",
    "a[b]",
    "a]",
    "a\\",
    "a\\*",
    "ab",
    "*",
    "?",
    "[",
    "%",
    "_",
    "a%",
    "a_",
]


def test_glob_characters_are_ordinary_in_keys(memory: RedisMemory) -> None:
    for key in GLOBBY:
        memory.write(key, key)
    for prefix in ["a*", "a?", "a[", "a[b", "a\\", "*", "?", "[", "a", "%", "_", ""]:
        assert memory.search(prefix) == sorted((k, k) for k in GLOBBY if k.startswith(prefix)), prefix


def test_glob_characters_are_ordinary_in_namespaces(redis_url: str) -> None:  # noqa: F811
    tag = uuid4().hex
    stars, plain = RedisMemory(redis_url, namespace=f"{tag}*:"), RedisMemory(redis_url, namespace=f"{tag}x:")
    stars.write("k", "stars")
    plain.write("k", "plain")
    assert stars.search("") == [("k", "stars")] and plain.search("") == [("k", "plain")]
    stars.close()
    plain.close()


def test_values_are_json_strings_indexed_in_a_sorted_set(memory: RedisMemory, raw: redis.Redis) -> None:
    memory.write("k", {"a": [1, "é"]})
    assert raw.get(f"{memory.namespace}k:k") == '{"a": [1, "é"]}'.encode()
    assert raw.zrange(f"{memory.namespace}index", 0, -1, withscores=True) == [(b"k", 0.0)]


_STORABLE = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(_STORABLE, min_size=1, max_size=20, unique=True), data=st.data())
def test_order_and_prefixes_match_python_for_any_unicode_key(keys: list[str], data: st.DataObject) -> None:
    """ZRANGEBYLEX compares UTF-8 bytes: Python's code point order, non-BMP and U+10FFFF included."""
    memory = redis_fresh_namespace()
    for key in keys:
        memory.write(key, key)
    assert memory.search("") == sorted((k, k) for k in keys)
    key = data.draw(st.sampled_from(keys))
    for prefix in {key[:1], key[:2], key, key + "\U0010ffff"}:
        assert memory.search(prefix) == sorted((k, k) for k in keys if k.startswith(prefix))
    memory.close()


def test_edge_keys_round_trip(memory: RedisMemory) -> None:
    keys = ["\x00", "a\x00b", "\U0010ffff", "\U0010ffff\U0010ffff", "🙂", "\x7f", "\xff", "x" * 10_000]
    for key in keys:
        memory.write(key, key)
    assert memory.search("") == sorted((k, k) for k in keys)
    assert memory.search("\U0010ffff") == [("\U0010ffff", "\U0010ffff"), ("\U0010ffff\U0010ffff",) * 2]


def test_large_searches_are_fetched_in_batches(memory: RedisMemory) -> None:
    for i in range(2500):
        memory.write(f"item/{i:05d}", i)
    found = memory.search("item/")
    assert [v for _, v in found] == list(range(2500))


def test_lone_surrogates(memory: RedisMemory) -> None:
    with pytest.raises(MemoryStoreError, match="surrogate"):
        memory.write("bad\ud800", 1)
    assert memory.read("bad\ud800") is None and memory.search("\ud800") == []
    memory.write("text", "a lone \udfff inside")
    assert memory.read("text") == "a lone \udfff inside"


def test_an_entry_deleted_behind_our_back_is_skipped(memory: RedisMemory, raw: redis.Redis) -> None:
    memory.write("a", 1)
    memory.write("b", 2)
    raw.delete(f"{memory.namespace}k:a")
    assert memory.search("") == [("b", 2)]


# --- connections and secrets ------------------------------------------------------------------------------------


def test_connection_refused_fails_fast_and_clearly() -> None:
    started = time.monotonic()
    with pytest.raises(MemoryStoreError, match=r"redis memory at redis://127\.0\.0\.1:\d+/0: cannot connect"):
        RedisMemory(f"redis://127.0.0.1:{closed_port()}/0", socket_timeout=0.5)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("secret", [True, False])
@pytest.mark.parametrize(
    "template",
    [
        "redis://user:{pw}@127.0.0.1:{port}/0",
        "redis://:{pw}@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password={pw}",
        "http://user:{pw}@127.0.0.1:{port}/0",  # a wrong scheme: refused as configuration
    ],
)
def test_the_password_never_appears_in_messages(template: str, secret: bool) -> None:
    password = "s3cr3t-Pa55w0rd"
    url = template.format(pw=password, port=closed_port())
    with pytest.raises((MemoryStoreError, ConfigError)) as caught:
        RedisMemory(SecretStr(url) if secret else url, socket_timeout=0.5)
    assert password not in str(caught.value) and password not in repr(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_wrong_credentials_are_reported_without_the_password(redis_url: str, raw: redis.Redis) -> None:  # noqa: F811
    user, password = f"aeon-{uuid4().hex[:8]}", "right-Pa55w0rd"
    raw.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"])
    try:
        authorised = redis_url.replace("redis://", f"redis://{user}:{password}@")
        memory = RedisMemory(SecretStr(authorised), namespace=f"acl:{uuid4().hex}:")
        memory.write("k", 1)
        assert password not in repr(memory)
        memory.close()
        with pytest.raises(MemoryStoreError) as caught:
            RedisMemory(SecretStr(authorised.replace(password, "wrong-Pa55w0rd")), socket_timeout=1)
        assert "wrong-Pa55w0rd" not in str(caught.value)
        assert "redis memory at redis://127.0.0.1:" in str(caught.value)
    finally:
        raw.acl_deluser(user)


def test_a_connection_the_server_dropped_is_replaced(memory: RedisMemory, raw: redis.Redis) -> None:
    memory.write("k", 1)
    raw.client_kill_filter(_id=memory._client.client_id())
    memory.write("k", 2)
    assert memory.read("k") == 2
    assert memory.increment("n") == 1


class FlakyPipelines:
    """Pipelines whose ``execute`` loses the connection ``failures`` times (after sending), then works."""

    def __init__(self, memory: RedisMemory, failures: int) -> None:
        self.real, self.failures, self.executions = memory._client.pipeline, failures, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        pipe = self.real(*args, **kwargs)
        execute = pipe.execute

        def flaky_execute(*a: Any, **k: Any) -> Any:
            self.executions += 1
            if self.executions <= self.failures:
                raise redis.ConnectionError("Connection closed by server.")
            return execute(*a, **k)

        pipe.execute = flaky_execute
        return pipe


def test_a_lost_write_is_retried_once(memory: RedisMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    flaky = FlakyPipelines(memory, failures=1)
    monkeypatch.setattr(memory._client, "pipeline", flaky)
    memory.write("k", 1)  # idempotent: safe to send again
    assert flaky.executions == 2 and memory.read("k") == 1
    flaky.failures = flaky.executions + 2  # the next two executions fail: one retry is not enough
    with pytest.raises(
        MemoryStoreError, match=r"cannot write 'k': Connection closed by server\. Is the server"
    ):
        memory.write("k", 2)


def test_a_lost_increment_is_never_retried(memory: RedisMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a lost INCRBY ran cannot be known, so it is reported rather than risked twice."""
    flaky = FlakyPipelines(memory, failures=1)
    monkeypatch.setattr(memory._client, "pipeline", flaky)
    with pytest.raises(MemoryStoreError, match="cannot increment 'n'"):
        memory.increment("n")
    assert flaky.executions == 1
    assert memory.increment("n") == 1


def test_a_missing_client_library_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ConfigError, match=r"pip install 'aeon-core\[redis\]'"):
        RedisMemory()


def test_listing_plugins_does_not_import_the_client_library() -> None:
    import subprocess

    probe = "import sys, aeon_plugins.redis_memory; print('redis' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
        == "False"
    )


def test_selected_by_name_with_a_secret_url(
    redis_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AEON_TEST_REDIS_URL", redis_url)
    namespace = f"engine:{uuid4().hex}:"
    config = AeonConfig().with_choice(
        "memory", "redis", url={"$env": "AEON_TEST_REDIS_URL"}, namespace=namespace, socket_timeout=2
    )
    with Engine(config) as engine:
        memory = engine.memory
        assert isinstance(memory, RedisMemory)
        memory.write("k", "v")
    assert RedisMemory(redis_url, namespace=namespace).read("k") == "v"


# --- increment ---------------------------------------------------------------------------------------------------


class TestInt64Counter(Int64CounterCases):
    @pytest.fixture
    def counter(self, memory: RedisMemory) -> RedisMemory:
        return memory
