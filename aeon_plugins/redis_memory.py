"""The ``redis`` memory backend: key/value memory on a Redis server, shared by any number of processes.

Each key is a Redis string holding JSON text; a sorted set (every score 0) indexes the keys, so prefix search is
``ZRANGEBYLEX`` over exact byte bounds: ``*``, ``?``, ``[``, ``%`` and ``_`` are ordinary characters, which SCAN
MATCH globbing would not allow. A write sets the value and indexes the key in one MULTI/EXEC transaction.

The ``redis`` client library is imported when the backend is built, so listing plugins never needs it. The
connection URL may carry a password: it arrives as a ``SecretStr`` from ``{ "$env" = ... }`` and is kept out of
every message and ``repr``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast
from urllib.parse import parse_qsl, urlsplit

from pydantic import SecretStr

from aeon_kernel import ConfigError, Memory, MemoryStoreError, Register, hookimpl
from aeon_kernel.kit import (
    check_amount,
    check_key,
    check_prefix,
    decode_value,
    encode_value,
    increment_error,
    is_utf8,
)

if TYPE_CHECKING:
    import redis

T = TypeVar("T")

DEFAULT_URL: Final = "redis://127.0.0.1:6379/0"
#: Keys fetched per MGET during a search: bounds the size of one reply.
_MGET_BATCH: Final = 1000


def _redact(url: str) -> tuple[str, list[str]]:
    """A form of ``url`` safe to show (no user info, no query), and the secrets it holds, to scrub from messages."""
    try:
        parts = urlsplit(url)
        secrets = [parts.password or ""] + [v for k, v in parse_qsl(parts.query) if k.lower() == "password"]
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "<invalid redis URL>", [url]
    return f"{parts.scheme}://{host}{parts.path}", [s for s in secrets if s]


class RedisMemory(Memory):
    """Memory on a Redis server; ``namespace`` prefixes every Redis key, keeping several stores apart.

    The value of key ``k`` lives at ``{namespace}k:{k}``; the index at ``{namespace}index``. Targets one Redis
    server (not Redis Cluster, whose transactions cannot span slots).
    """

    def __init__(
        self,
        url: str | SecretStr = DEFAULT_URL,
        namespace: str = "aeon:",
        socket_timeout: float = 5.0,
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ConfigError(
                "the 'redis' memory backend needs the redis client library: pip install 'aeon-core[redis]'"
            ) from None
        raw_url = url.get_secret_value() if isinstance(url, SecretStr) else url
        if not isinstance(raw_url, str):
            raise ConfigError(f"redis memory: url must be a string, got {type(raw_url).__name__}")
        if not isinstance(namespace, str):
            raise ConfigError(f"redis memory: namespace must be a string, got {namespace!r}")
        self._display, self._secrets = _redact(raw_url)
        self.namespace = namespace
        self._index = f"{namespace}index".encode()
        self._value_prefix = f"{namespace}k:".encode()
        self._dropped: type[Exception] = redis.ConnectionError
        self._transient: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        self._redis_error: type[Exception] = redis.RedisError
        try:
            # No automatic retries: a retried INCRBY whose reply was lost would count twice. write, read and
            # search retry a dropped connection once themselves (they are idempotent); increment never does,
            # and a timeout is not retried (it would only double the wait).
            self._client: redis.Redis = redis.Redis.from_url(
                raw_url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                retry=Retry(NoBackoff(), 0),
                decode_responses=False,
            )
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"redis memory: cannot use the URL {self._display}: {self._scrub(exc)}"
            ) from None
        try:
            self._call("connect", None, self._client.ping, idempotent=False)  # a fresh pool: nothing stale
        except MemoryStoreError:
            self._client.close()
            raise

    def __repr__(self) -> str:
        return f"RedisMemory(url={self._display!r}, namespace={self.namespace!r})"

    # --- plumbing ----------------------------------------------------------------------------------------------

    def _scrub(self, exc: BaseException) -> str:
        message = str(exc).rstrip(". ") or type(exc).__name__
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return message

    def _call(self, action: str, key: str | None, operation: Callable[[], T], *, idempotent: bool) -> T:
        """Run ``operation``, turning client errors into MemoryStoreError (the password never shown)."""
        what = f"{action} {key!r}" if key is not None else action
        for attempt in (1, 2):
            try:
                return operation()
            except self._transient as exc:
                if idempotent and attempt == 1 and isinstance(exc, self._dropped):
                    continue  # a pooled connection the server had dropped: one fresh connection may do
                raise MemoryStoreError(
                    f"redis memory at {self._display}: cannot {what}: {self._scrub(exc)}. "
                    f"Is the server running and reachable, and are the credentials right?"
                ) from None
            except self._redis_error as exc:
                raise MemoryStoreError(
                    f"redis memory at {self._display}: cannot {what}: {self._scrub(exc)}"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _value_key(self, member: bytes) -> bytes:
        return self._value_prefix + member

    # --- the Memory contract -----------------------------------------------------------------------------------

    def write(self, key: str, value: Any) -> None:
        text = encode_value(check_key(key), value)
        member = key.encode()

        def transaction() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.set(self._value_key(member), text.encode())
            pipe.zadd(self._index, {member: 0})
            pipe.execute()

        self._call("write", key, transaction, idempotent=True)

    def read(self, key: str) -> Any | None:
        if not isinstance(key, str):
            raise MemoryStoreError(f"memory keys must be non-empty strings, got {key!r}")
        if not key or not is_utf8(key):
            return None  # no such key can have been written
        text = self._call(
            "read", key, lambda: self._client.get(self._value_key(key.encode())), idempotent=True
        )
        return None if text is None else decode_value(key, text)

    def search(self, prefix: str) -> list[tuple[str, Any]]:
        if not is_utf8(check_prefix(prefix)):
            return []  # keys never hold a lone surrogate
        if prefix:
            # Members are UTF-8, which never contains the byte 0xFF, so every member that starts with the prefix
            # sorts below prefix + 0xFF, and every member in [prefix, prefix + 0xFF) starts with it.
            encoded = prefix.encode()
            low, high = b"[" + encoded, b"(" + encoded + b"\xff"
        else:
            low, high = b"-", b"+"

        def fetch() -> list[tuple[bytes, bytes | None]]:
            # decode_responses=False: replies are bytes, whatever the client's type hints allow for.
            members = cast("list[bytes]", self._client.zrangebylex(self._index, low, high))
            values: list[bytes | None] = []
            for start in range(0, len(members), _MGET_BATCH):
                batch = members[start : start + _MGET_BATCH]
                values.extend(
                    cast("list[bytes | None]", self._client.mget([self._value_key(m) for m in batch]))
                )
            return list(zip(members, values, strict=True))

        pairs = self._call("search", prefix, fetch, idempotent=True)
        # Bytes order is code point order for UTF-8, so the index order is Python's str order.
        return [(m.decode(), decode_value(m.decode(), v)) for m, v in pairs if v is not None]

    def increment(self, key: str, amount: int = 1) -> int:
        """INCRBY works on the stored JSON because the JSON text of an integer is its decimal digits."""
        check_amount(check_key(key), amount)
        member = key.encode()

        def transaction() -> list[Any]:
            pipe = self._client.pipeline(transaction=True)
            pipe.incrby(self._value_key(member), amount)
            pipe.zadd(self._index, {member: 0})
            return pipe.execute(raise_on_error=False)

        total, _ = self._call("increment", key, transaction, idempotent=False)
        if isinstance(total, self._redis_error):
            raise increment_error(key, amount, self.read(key))
        return int(total)

    def close(self) -> None:
        self._client.close()


@hookimpl
def aeon_register_memory_backends(register: Register) -> None:
    register("redis", RedisMemory)
